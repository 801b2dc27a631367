/**
 * Where scale-out's work goes, in counts that do not depend on how busy the
 * host is: for each library and process count, one drain of N queued jobs
 * (the scale-out phase's, bench/scale-out.ts) with Postgres's own counters
 * read around it, per job: index tuples read, heap tuples fetched, buffer
 * hits, row updates (and HOT), commits, and the CPU of every backend of the
 * database and of the worker processes.
 *
 *   npx tsx bench/scale-counters.ts [processes=1,8] [libs=leasehold,graphile] [n=40000]
 *
 * Also printed: the indexes read most, per job. ANALYZE=1 analyzes the
 * database after the enqueue, to compare a drain under statistics that know
 * the queue with one under none (the bench's, and a burst's before
 * autovacuum).
 */
import pg from "pg";
import type { ChildLib } from "./children.ts";
import { checkpoint, dropDb, dsnFor, freshDb, DEFAULT_DSN } from "./db.ts";
import { backendCpu, waitNoBackends } from "./db-activity.ts";
import { startDrainFleet } from "./drain-fleet.ts";
import { loadLib } from "./driver.ts";
import type { LibId } from "./lib.ts";
import { SCALE_OUT_POOL, SCALE_OUT_SLOTS } from "./scale-out.ts";
import { now, sleep } from "./stats.ts";

const processCounts = (process.argv[2] ?? "1,8").split(",").map(Number);
const libs = (process.argv[3] ?? "leasehold,graphile").split(",") as LibId[];
const n = Number(process.argv[4] ?? 40_000);

const COUNTERS = `select
  (select coalesce(sum(idx_tup_read), 0) from pg_stat_user_indexes)::float8 as idx_tup_read,
  (select coalesce(sum(idx_tup_fetch), 0) + coalesce(sum(seq_tup_read), 0) from pg_stat_user_tables)::float8 as tup_fetched,
  (select coalesce(sum(n_tup_upd), 0) from pg_stat_user_tables)::float8 as updates,
  (select coalesce(sum(n_tup_hot_upd), 0) from pg_stat_user_tables)::float8 as hot_updates,
  (select blks_hit + blks_read from pg_stat_database where datname = current_database())::float8 as buffers,
  (select xact_commit from pg_stat_database where datname = current_database())::float8 as commits`;


for (const lib of libs) {
  const impl = await loadLib(lib);
  for (const p of processCounts) {
    const db = `bench_counters_${lib}_p${p}`;
    await freshDb(DEFAULT_DSN, db);
    const dsn = dsnFor(DEFAULT_DSN, db);
    const producer = await impl.open(dsn, "bench");
    await producer.prepareBatch(n)();
    await producer.close();
    if (process.env.ANALYZE) {
      const c = new pg.Client({ connectionString: dsn });
      await c.connect();
      await c.query("analyze");
      await c.end();
    }
    await checkpoint(DEFAULT_DSN);
    const fleet = await startDrainFleet(lib as ChildLib, p, { dsn, verifyDsn: dsn, queue: "bench", n, slots: SCALE_OUT_SLOTS, poolSize: SCALE_OUT_POOL });
    await waitNoBackends(DEFAULT_DSN, db).catch(() => {});
    const admin = new pg.Client({ connectionString: dsn });
    await admin.connect();
    await admin.query("select pg_stat_clear_snapshot()");
    const before = (await admin.query(COUNTERS)).rows[0];
    const perIndex = async () => new Map((await admin.query<{ name: string; scans: number; read: number; fetched: number }>(
      "select indexrelname as name, idx_scan::float8 as scans, idx_tup_read::float8 as read, idx_tup_fetch::float8 as fetched from pg_stat_user_indexes")).rows.map((r) => [r.name, r]));
    const indexesBefore = await perIndex();
    const cpuBefore = await backendCpu(admin, db);
    const t0 = now();
    fleet.go();
    while (fleet.calls() < n) await sleep(5);
    while ((await impl.remaining(admin, "bench")) > 0) await sleep(2);
    const ms = now() - t0;
    const cpuAfter = await backendCpu(admin, db);
    const children = await fleet.stop();
    await sleep(700); // the stats collector's flush
    await admin.query("select pg_stat_clear_snapshot()");
    const after = (await admin.query(COUNTERS)).rows[0];
    const indexes = [...(await perIndex())].map(([name, r]) => {
      const b = indexesBefore.get(name);
      return { name, scans: (r.scans - (b?.scans ?? 0)) / n, read: (r.read - (b?.read ?? 0)) / n, fetched: (r.fetched - (b?.fetched ?? 0)) / n };
    }).filter((r) => r.scans > 0).sort((a, b) => b.read - a.read);
    await admin.end();
    let pgCpu = 0;
    for (const [pid, ms2] of cpuAfter) pgCpu += ms2 - (cpuBefore.get(pid) ?? 0);
    const per = (k: string) => ((after[k] - before[k]) / n).toFixed(2);
    const workerCpu = children.reduce((a, c) => a + c.cpu_ms, 0);
    console.log(`${lib} p${p}: ${(n / (ms / 1000)).toFixed(0)} jobs/s; per job: idx_tup_read ${per("idx_tup_read")}, tuples fetched ${per("tup_fetched")}, buffers ${per("buffers")}, updates ${per("updates")} (HOT ${per("hot_updates")}), commits ${per("commits")}; backend CPU ${((pgCpu * 1000) / n).toFixed(1)} µs/job${workerCpu ? `, workers ${((workerCpu * 1000) / n).toFixed(1)} µs/job` : ""}`);
    for (const r of indexes.slice(0, 6)) console.log(`  ${r.name}: scans ${r.scans.toFixed(3)}, read ${r.read.toFixed(2)}, fetched ${r.fetched.toFixed(2)} per job`);
    await dropDb(DEFAULT_DSN, db);
  }
}
process.exit(0);
