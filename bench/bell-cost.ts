/**
 * What the bell (shared/runner/bell.ts) costs enqueues: single-job enqueues
 * from PRODUCERS connections at once while a runner drains the queue as the
 * jobs arrive, its bell on and off in alternating rounds; and how many
 * notifications the enqueues sent (docs/internals.md, "The runner loop").
 *
 *   npx tsx bench/bell-cost.ts [PRODUCERS=8]   (BENCH_DSN, default the local Postgres)
 */
import pg from "pg";
import * as z from "zod";
import { createPgPool } from "../shared/db/drivers/pg.ts";
import { migrate } from "../shared/db/migrate.ts";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { runWorker } from "../shared/runner/worker.ts";
const url = process.env.BENCH_DSN ?? "postgres://postgres@127.0.0.1:5432/postgres";
const schema = "bellcost";
const admin = createPgPool(url, 2);
await admin.query(`drop schema if exists ${schema} cascade`);
await migrate(admin, schema);
const t = defineJob({ name: "x", queue: "q", schema: z.object({ i: z.number() }), handler: () => {} });
const l = new pg.Client({ connectionString: url }); await l.connect(); await l.query("listen leasehold_job_ready");
let heard = 0; l.on("notification", () => heard++);
const res: Record<string, number[]> = {};
const PRODUCERS = Number(process.argv[2] ?? 8), EACH = 250;
for (let round = 0; round < 4; round++) for (const bell of [false, true]) {
  const pool = createPgPool(url, 3);
  const producers = createPgPool(url, PRODUCERS);
  const store = { db: pool, schema };
  let stop = false;
  const worker = runWorker({ store, registry: createRegistry([t]), queues: ["q"], runnerId: "w", slots: 20, linger: "fixed", idleMs: 60_000, pollMs: 50, bell, remainingMs: () => (stop ? 0 : 1e9) });
  await new Promise((r) => setTimeout(r, 300));
  heard = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: PRODUCERS }, async () => { for (let i = 0; i < EACH; i++) await enqueue({ db: producers, schema }, t, { i }); }));
  const rate = (PRODUCERS * EACH) / ((performance.now() - t0) / 1000);
  (res[`bell ${bell ? "on " : "off"}`] ??= []).push(rate);
  (res[`bell ${bell ? "on " : "off"} notifications`] ??= []).push(heard);
  stop = true; await enqueue({ db: producers, schema }, t, { i: -1 });
  await worker; await pool.end(); await producers.end();
  await admin.query(`delete from ${schema}.jobs`);
}
for (const [k, v] of Object.entries(res)) { const s = [...v].sort((a, b) => a - b); console.log(k.padEnd(24), "median", Math.round(s[Math.floor(s.length / 2)]!), " worst", Math.round(s[0]!), " runs", v.map(Math.round).join(" ")); }
await l.end(); await admin.query(`drop schema ${schema} cascade`); await admin.end();
