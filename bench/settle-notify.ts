/**
 * What keeping results and notifying awaited jobs costs the success settle,
 * measured beside the statement before them in the same run:
 *
 *   DATABASE_URL=postgres://... npx tsx bench/settle-notify.ts [rounds]
 *
 * Each round claims a batch of jobs and settles it with one of the variants,
 * in turn, so that load on the machine falls on every variant alike:
 * - `before`: the success statement as it was (no result, no notification);
 * - `no result`: today's statement, handlers that returned nothing;
 * - `result`: today's, each job keeping a small JSON result;
 * - `all awaited`: today's with a result, every job awaited (each settle
 *   sends one notification per job to a listening connection).
 * Prints the median and p90 settle time per variant and batch size.
 */
import pg from "pg";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { sql, type Store } from "../shared/db/db.ts";
import { createPgPool } from "../shared/db/drivers/pg.ts";
import { enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { defineJob } from "../shared/jobs/job.ts";
import { migrate } from "../shared/db/migrate.ts";
import { JOB_ENDED_CHANNEL, settleJobs, type Lease } from "../shared/lifecycle/settle.ts";
import * as z from "zod";

const BEFORE = `with done as (
  update leasehold.jobs j
  set status = 'succeeded', finished_at = now(), lease_expires_at = null, last_error = null,
      suspect = false, owes_attempt = false, start_first = false
  from unnest($1::bigint[], $2::uuid[]) as s(id, token)
  where j.id = s.id and j.lease_token = s.token and j.status = 'running' and j.lease_expires_at > now()
  returning j.id, j.runs, j.generation, j.runner_id, j.started_at
), recorded as (
  insert into leasehold.job_attempts (job_id, attempt, generation, runner_id, claimed_at, ended_at, outcome, error)
  select id, runs, generation, runner_id, started_at, now(), 'succeeded'::leasehold.attempt_outcome, null::text from done
)
select id::text, 'succeeded'::text as kind, null::text as status from done`;

type Variant = "before" | "no result" | "result" | "all awaited";
const VARIANTS: Variant[] = ["before", "no result", "result", "all awaited"];

const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const rounds = Number(process.argv[2] ?? 40);
const schema = `settle_notify_${process.pid}`;
const pool = createPgPool(url, 4);
const store: Store = { db: pool, schema };
const type = defineJob({ name: "n", queue: "q", schema: z.object({ n: z.number() }), handler: () => {} });

async function settleOnce(variant: Variant, size: number): Promise<number> {
  await enqueueJobs(store, Array.from({ length: size }, (_, n) => job(type, { n })));
  const jobs = await claimJobs(store, { queue: "q", runnerId: "bench", limit: size, maxLeaseMs: 60_000 });
  const leases: Lease[] = jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken }));
  if (variant === "all awaited") await pool.query(sql(schema, "update leasehold.jobs set awaited = true where id = any($1::bigint[])"), [leases.map((l) => l.id)]);
  const t0 = performance.now();
  if (variant === "before") {
    await pool.query(sql(schema, BEFORE), [leases.map((l) => l.id), leases.map((l) => l.leaseToken)]);
  } else {
    const result = variant === "no result" ? null : JSON.stringify({ square: 49, note: "done" });
    await settleJobs(store, { succeeded: leases.map((l) => ({ ...l, result })) });
  }
  return performance.now() - t0;
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

await migrate(pool, schema);
const listener = new pg.Client(url);
await listener.connect();
let notified = 0;
listener.on("notification", () => notified++);
await listener.query(`listen ${JOB_ENDED_CHANNEL}`);
try {
  for (const size of [1, 100]) {
    const times = new Map<Variant, number[]>(VARIANTS.map((v) => [v, []]));
    for (let i = 0; i < 5; i++) for (const v of VARIANTS) await settleOnce(v, size); // warm-up
    for (let r = 0; r < rounds; r++) for (const v of VARIANTS) times.get(v)!.push(await settleOnce(v, size));
    for (const v of VARIANTS) {
      const xs = times.get(v)!;
      console.log(`batch ${String(size).padStart(3)}  ${v.padEnd(12)} median ${pct(xs, 0.5).toFixed(2)} ms  p90 ${pct(xs, 0.9).toFixed(2)} ms`);
    }
  }
  await new Promise((r) => setTimeout(r, 200));
  console.log(`notifications received: ${notified}`);
} finally {
  await listener.end();
  await pool.query(`drop schema "${schema}" cascade`);
  await pool.end();
}
