import * as z from "zod";
import type { Store } from "../shared/db/db.ts";
import { enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { withLeaseholdDb } from "./db.ts";
import type { Phase } from "./phases.ts";
import { round } from "./stats.ts";

/**
 * What fairness costs jobs that have no group (issue 15: within 5 % of the
 * previous claim, in the same run). Empty ungrouped jobs are executed by
 * `runWorker` with the default claim (fair), and with `fair: false`: the
 * plain claim, priority order with no group walk and, as the job type has no
 * limit, no limits' part, which is the claim as it was before fairness (plus
 * the run counting the runner needs). Same database, same sizes, in rounds
 * whose order alternates, so a drift of the host's load falls on both.
 */
const ROUNDS = 5;

export interface UngroupedClaimRun {
  /** Jobs per second per round: start of the worker to the last success written. */
  fair: number[];
  plain: number[];
  succeeded: boolean;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function drain(store: Store, queue: string, n: number, slots: number, fair: boolean): Promise<{ jobsPerS: number; ok: boolean }> {
  const type = defineJob({ name: `ungrouped-${queue}`, schema: z.object({ i: z.number().int() }), queue, handler: () => {} });
  await enqueueJobs(store, Array.from({ length: n }, (_, i) => job(type, { i })));
  let written = 0;
  let lastWrittenAt = 0;
  const t0 = Date.now();
  const summary = await runWorker({
    linger: "fixed",
    store, registry: createRegistry([type]), queues: [queue], runnerId: `ungrouped-${queue}`, slots, idleMs: 300, pollMs: 20, fair,
    onSettled: (e) => {
      if (e.accepted && e.outcome === "succeeded" && ++written === n) lastWrittenAt = Date.now();
    },
  });
  return { jobsPerS: round(n / ((lastWrittenAt - t0) / 1000), 0), ok: written === n && summary.succeeded === n };
}

export const ungroupedClaimPhase: Phase = {
  name: "ungrouped-claim",
  title: "Execute ungrouped jobs with the fair claim (default) and with the plain claim it replaced, in alternating rounds",
  libs: ["leasehold"],
  async run(_lib, ctx) {
    return withLeaseholdDb(ctx.adminDsn, `bench_leasehold_ungrouped_claim_r${ctx.run}`, ctx.poolSize, async (store) => {
      // Twice the execute phase's batch: a drain of well under a second is mostly the host's noise.
      const n = 2 * ctx.sizes.batch;
      const r: UngroupedClaimRun = { fair: [], plain: [], succeeded: true };
      for (let i = 0; i < ROUNDS; i++) {
        const order = (i + ctx.run) % 2 === 0 ? [true, false] : [false, true];
        for (const fair of order) {
          const { jobsPerS, ok } = await drain(store, `${fair ? "fair" : "plain"}-${i}`, n, ctx.sizes.slots, fair);
          (fair ? r.fair : r.plain).push(jobsPerS);
          r.succeeded &&= ok;
        }
      }
      const fair = median(r.fair);
      const plain = median(r.plain);
      return { jobs: n, rounds: ROUNDS, ...r, fair_jobs_per_s: fair, plain_jobs_per_s: plain, ratio: round(fair / plain, 3) };
    });
  },
  metrics: {
    fair_jobs_per_s: (r) => r.fair_jobs_per_s,
    plain_jobs_per_s: (r) => r.plain_jobs_per_s,
    ratio: (r) => r.ratio,
  },
  check: (r) => r.succeeded,
};
