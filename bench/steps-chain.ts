import * as z from "zod";
import { namesAs, type Queryable, type Store } from "../shared/db/db.ts";
import { enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob, type JobType } from "../shared/jobs/job.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { withLeaseholdDb } from "./db.ts";
import type { Phase } from "./phases.ts";
import { round } from "./stats.ts";

/**
 * What durable steps cost (issue 25: no more than a chain): a job of 10
 * steps (`ctx.step`) against the same work as 10 chained jobs (each job
 * enqueues the next from its handler), drained by `runWorker` on one
 * database, in rounds whose order alternates, so a drift of the host's load
 * falls on both. Round trips are counted at the pool.
 */
const PARTS = 10;
const ROUNDS = 3;

export interface StepsChainRun {
  /** Parts per second per round: start of the worker to its end. */
  steps: number[];
  chain: number[];
  /** Database round trips per part, per round. */
  steps_trips: number[];
  chain_trips: number[];
  succeeded: boolean;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function jobTypes(queue: string) {
  const stepped = defineJob({
    name: `stepped-${queue}`, queue, schema: z.object({ n: z.number() }),
    handler: async ({ n }, ctx) => {
      let acc = n;
      for (let i = 0; i < PARTS; i++) acc = await ctx.step(`part ${i}`, () => acc + i);
      return acc;
    },
  });
  const chained: JobType<z.ZodObject<{ n: z.ZodNumber; part: z.ZodNumber }>> = defineJob({
    name: `chained-${queue}`, queue, schema: z.object({ n: z.number(), part: z.number() }),
    handler: async ({ n, part }, ctx) => {
      if (part + 1 < PARTS) await ctx.enqueue(chained, { n: n + part, part: part + 1 });
      return n + part;
    },
  });
  return { stepped, chained };
}

async function drain(store: Store, shape: "steps" | "chain", queue: string, units: number, slots: number) {
  const { stepped, chained } = jobTypes(queue);
  let trips = 0;
  const counting: Queryable = namesAs({ query: (text, values) => (trips++, store.db.query(text, values)) }, store.db);
  const counted: Store = { db: counting, schema: store.schema };
  await enqueueJobs(store, Array.from({ length: units }, (_, n) => (shape === "steps" ? job(stepped, { n }) : job(chained, { n, part: 0 }))));
  const t0 = Date.now();
  const summary = await runWorker({
    linger: "fixed",
    store: counted, registry: createRegistry([stepped, chained]), queues: [queue], runnerId: `steps-chain-${queue}`, slots, idleMs: 300, pollMs: 20,
  });
  const parts = units * PARTS;
  const expected = shape === "steps" ? units : parts;
  return { partsPerS: round(parts / ((Date.now() - t0) / 1000), 0), tripsPerPart: round(trips / parts, 2), ok: summary.succeeded === expected };
}

export const stepsChainPhase: Phase = {
  name: "steps-chain",
  title: "A job of 10 durable steps against the same work as 10 chained jobs, in alternating rounds",
  libs: ["leasehold"],
  async run(_lib, ctx) {
    return withLeaseholdDb(ctx.adminDsn, `bench_leasehold_steps_chain_r${ctx.run}`, ctx.poolSize, async (store) => {
      const units = Math.max(10, Math.round(ctx.sizes.batch / 50));
      const r: StepsChainRun = { steps: [], chain: [], steps_trips: [], chain_trips: [], succeeded: true };
      for (let i = 0; i < ROUNDS; i++) {
        const order = (i + ctx.run) % 2 === 0 ? (["steps", "chain"] as const) : (["chain", "steps"] as const);
        for (const shape of order) {
          const { partsPerS, tripsPerPart, ok } = await drain(store, shape, `${shape}-${i}`, units, ctx.sizes.slots);
          r[shape].push(partsPerS);
          r[`${shape}_trips`].push(tripsPerPart);
          r.succeeded &&= ok;
        }
      }
      const steps = median(r.steps);
      const chain = median(r.chain);
      return {
        units, parts: PARTS, rounds: ROUNDS, ...r,
        steps_parts_per_s: steps, chain_parts_per_s: chain, ratio: round(steps / chain, 3),
        steps_trips_per_part: median(r.steps_trips), chain_trips_per_part: median(r.chain_trips),
      };
    });
  },
  metrics: {
    steps_parts_per_s: (r) => r.steps_parts_per_s,
    chain_parts_per_s: (r) => r.chain_parts_per_s,
    ratio: (r) => r.ratio,
    steps_trips_per_part: (r) => r.steps_trips_per_part,
    chain_trips_per_part: (r) => r.chain_trips_per_part,
  },
  check: (r) => r.succeeded,
};
