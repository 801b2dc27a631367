/**
 * A job of 10 steps against the same work as 10 chained jobs (each job
 * enqueues the next from its handler), through `runWorker` on one fresh
 * schema, in alternating rounds:
 *
 *   DATABASE_URL=postgres://... npx tsx bench/steps-vs-chain.ts [rounds] [jobs]
 *
 * Prints, per shape, the median wall time to drain `jobs` ten-part units and
 * the database round trips per part. Not yet a phase of `npm run bench`.
 */
import { z } from "zod";
import type { Queryable, Store } from "../shared/db.ts";
import { createPgPool } from "../shared/drivers/pg.ts";
import { enqueueJobs, job } from "../shared/enqueue.ts";
import { createRegistry, defineJob, type JobType } from "../shared/job.ts";
import { migrate } from "../shared/migrate.ts";
import { runWorker } from "../shared/worker.ts";

const PARTS = 10;
const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const rounds = Number(process.argv[2] ?? 3);
const units = Number(process.argv[3] ?? 200);
const schema = `steps_chain_${process.pid}`;
const pool = createPgPool(url, 8);
let queries = 0;
const counting: Queryable = { query: (text, values) => (queries++, pool.query(text, values)) };
const store: Store = { db: counting, schema };

const stepped = defineJob({
  name: "stepped", queue: "sc", schema: z.object({ n: z.number() }),
  handler: async ({ n }, ctx) => {
    let acc = n;
    for (let i = 0; i < PARTS; i++) acc = await ctx.step(`part ${i}`, () => acc + i);
    return acc;
  },
});
const chained: JobType<z.ZodObject<{ n: z.ZodNumber; part: z.ZodNumber }>> = defineJob({
  name: "chained", queue: "sc", schema: z.object({ n: z.number(), part: z.number() }),
  handler: async ({ n, part }, ctx) => {
    if (part + 1 < PARTS) await ctx.enqueue(chained, { n: n + part, part: part + 1 });
    return n + part;
  },
});
const registry = createRegistry([stepped, chained]);

async function drain(shape: "steps" | "chain"): Promise<{ ms: number; perPart: number }> {
  await enqueueJobs(store, Array.from({ length: units }, (_, n) =>
    shape === "steps" ? job(stepped, { n }) : job(chained, { n, part: 0 })));
  queries = 0;
  const t0 = performance.now();
  await runWorker({ store, registry, queues: ["sc"], runnerId: "bench", slots: 20, idleMs: 100, pollMs: 20 });
  return { ms: performance.now() - t0, perPart: queries / (units * PARTS) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

await migrate(pool, schema);
try {
  const results = { steps: [] as { ms: number; perPart: number }[], chain: [] as { ms: number; perPart: number }[] };
  for (let r = 0; r < rounds; r++) {
    for (const shape of ["steps", "chain"] as const) results[shape].push(await drain(shape));
  }
  for (const shape of ["steps", "chain"] as const) {
    const xs = results[shape];
    console.log(`${shape.padEnd(5)} ${units} units of ${PARTS}: median ${median(xs.map((x) => x.ms)).toFixed(0)} ms, ` +
      `${median(xs.map((x) => x.perPart)).toFixed(2)} round trips per part`);
  }
} finally {
  await pool.query(`drop schema "${schema}" cascade`);
  await pool.end();
}
