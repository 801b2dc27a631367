import pg from "pg";
import type { ChildLib } from "./children.ts";
import { sampleActivity, waitNoBackends, xactCommits } from "./db-activity.ts";
import { checkpoint, dropDb, dsnFor, freshDb } from "./db.ts";
import { startDrainFleet } from "./drain-fleet.ts";
import type { Lib, LibId } from "./lib.ts";
import type { BenchContext, Phase } from "./phases.ts";
import { now, round, sleep } from "./stats.ts";

/**
 * Scale-out, the normal case on Lambda: many runners at once. For each
 * process count, a fresh database with `sizes.scaleOut` queued jobs is
 * drained by that many worker processes of SCALE_OUT_SLOTS slots each,
 * started together once all are loaded. Timed from the start signal until
 * the database shows every job done. Also read, for the library's own
 * database only: transactions committed per job (pg_stat_database), and the
 * share of its busy backends waiting on WAL or IO (pg_stat_activity every
 * ~10 ms during the drain).
 */

export const SCALE_OUT_PROCESSES = [1, 2, 4, 8] as const;
export const SCALE_OUT_SLOTS = 10;
/** Connections per worker process, every library: 8 processes stay within a default max_connections of 100. */
export const SCALE_OUT_POOL = 10;

export interface DrainRecord {
  processes: number;
  jobs: number;
  exec_ms: number;
  jobs_per_s: number;
  handler_calls: number;
  remaining_after: number;
  /** Commits in the library's database during the drain: xact_commit after − before − the driver's polls. */
  commits: number;
  xact_commit: { before: number; after: number; driver_polls: number };
  commits_per_job: number;
  wal_wait_share: number | null;
  busy_per_sample: number | null;
  activity: Awaited<ReturnType<Awaited<ReturnType<typeof sampleActivity>>["stop"]>>;
  children: { startup_ms: number; peak_rss_mib: number; handler_calls: number }[];
}

async function drainOnce(lib: Lib, ctx: BenchContext, processes: number, n: number): Promise<DrainRecord> {
  const db = `bench_${lib.id}_scale_out_p${processes}_r${ctx.run}`;
  await freshDb(ctx.adminDsn, db);
  try {
    const dsn = dsnFor(ctx.adminDsn, db);
    const producer = await lib.open(dsn, "bench");
    try {
      await producer.prepareBatch(n)();
    } finally {
      await producer.close();
    }
    await checkpoint(ctx.adminDsn);
    const fleet = await startDrainFleet(lib.id as ChildLib, processes, {
      dsn, verifyDsn: dsn, queue: "bench", n, slots: SCALE_OUT_SLOTS, poolSize: SCALE_OUT_POOL,
    });
    // Every commit of the setup is counted before, none of the drain's.
    await waitNoBackends(ctx.adminDsn, db);
    const before = await xactCommits(ctx.adminDsn, db);
    const poller = new pg.Client({ connectionString: dsn });
    await poller.connect();
    let polls = 1;
    const pollerPid = (await poller.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;
    const sampler = await sampleActivity(ctx.adminDsn, db, [pollerPid]);
    const t0 = now();
    fleet.go();
    // The handlers say when all have run; the database then says when all are done.
    while (fleet.calls() < n) {
      if (now() - t0 > 600_000) throw new Error(`${lib.id}: ${fleet.calls()} of ${n} handlers ran in 10 minutes`);
      await sleep(5);
    }
    let remaining: number;
    while (polls++, (remaining = await lib.remaining(poller, "bench")) > 0) {
      if (now() - t0 > 600_000) throw new Error(`${lib.id}: ${remaining} jobs not done after 10 minutes`);
      await sleep(2);
    }
    const execMs = now() - t0;
    const activity = await sampler.stop();
    const children = await fleet.stop();
    await poller.end();
    await waitNoBackends(ctx.adminDsn, db);
    const after = await xactCommits(ctx.adminDsn, db);
    const commits = after - before - polls;
    return {
      processes, jobs: n,
      exec_ms: round(execMs, 1),
      jobs_per_s: round(n / (execMs / 1000), 1),
      handler_calls: children.reduce((a, c) => a + c.handler_calls, 0),
      remaining_after: remaining,
      commits,
      xact_commit: { before, after, driver_polls: polls },
      commits_per_job: round(commits / n, 3),
      wal_wait_share: activity.wal_wait_share,
      busy_per_sample: activity.busy_per_sample,
      activity,
      children,
    };
  } finally {
    await dropDb(ctx.adminDsn, db);
  }
}

export function scaleOutPhase(libs: readonly LibId[], processCounts: readonly number[] = SCALE_OUT_PROCESSES): Phase {
  const metrics: Phase["metrics"] = {};
  for (const k of processCounts) {
    metrics[`jobs_per_s_p${k}`] = (r) => r.by_processes[k]?.jobs_per_s;
    metrics[`commits_per_job_p${k}`] = (r) => r.by_processes[k]?.commits_per_job;
    metrics[`wal_wait_share_p${k}`] = (r) => r.by_processes[k]?.wal_wait_share;
  }
  return {
    name: "scale-out",
    libs,
    title: `Scale-out: ${processCounts.join(", ")} worker processes of ${SCALE_OUT_SLOTS} slots draining one queue`,
    async run(lib, ctx) {
      const n = ctx.sizes.scaleOut;
      const byProcesses: Record<number, DrainRecord> = {};
      for (const k of processCounts) {
        byProcesses[k] = await drainOnce(lib, ctx, k, n);
        ctx.log(`  ${k} process${k > 1 ? "es" : ""}: ${byProcesses[k]!.jobs_per_s} jobs/s, ${byProcesses[k]!.commits_per_job} commits/job, WAL/IO wait ${byProcesses[k]!.wal_wait_share}`);
      }
      return { jobs: n, slots: SCALE_OUT_SLOTS, pool: SCALE_OUT_POOL, processes: processCounts, by_processes: byProcesses };
    },
    metrics,
    // Exactly once: every job done in the database, and exactly n handler runs over all processes.
    check: (r: { jobs: number; by_processes: Record<number, DrainRecord> }) =>
      Object.values(r.by_processes).every((d) => d.remaining_after === 0 && d.handler_calls === r.jobs),
  };
}
