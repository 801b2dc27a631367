import { Logger, makeWorkerUtils, run } from "graphile-worker";
import pg from "pg";
import { peakRssMiB, type ChildArgs } from "./child-io.ts";
import { drainChild, type DrainResult } from "./drain-child.ts";
import { waitFor } from "./db.ts";
import { pkgVersion, type ExecResult, type HopResult, type Lib, type SqlClient } from "./lib.ts";
import { hopStats, now, round, RunLedger, sleep } from "./stats.ts";

/** graphile-worker 0.18 in its batched configuration (the docs' Performance-page values). */

export const GRAPHILE_WORKER = {
  concurrentJobs: 20,
  maxPoolSize: 22,
  localQueue: { size: 500 },
  completeJobBatchDelay: 0,
  failJobBatchDelay: 0,
};

const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") console.error(`[graphile ${level}] ${message}`);
});

const COUNT = `select count(*)::int as n from graphile_worker._private_jobs j
  join graphile_worker._private_tasks t on t.id = j.task_id where t.identifier = $1`;
const count = async (c: SqlClient, identifier: string) =>
  (await c.query<{ n: number }>(COUNT, [identifier])).rows[0]!.n;

export const graphile: Lib = {
  id: "graphile",
  name: "graphile-worker",
  get version() {
    return pkgVersion("graphile-worker");
  },
  settings: "batched: concurrentJobs 20, maxPoolSize 22, localQueue.size 500, completeJobBatchDelay 0, failJobBatchDelay 0; producer: addJobs / addJob",
  // Completed jobs are deleted.
  remaining: (db, queue) => count(db, queue),
  async open(dsn, queue) {
    const utils = await makeWorkerUtils({ connectionString: dsn, logger });
    await utils.migrate();
    return {
      prepareBatch(n, from = 0) {
        const specs = Array.from({ length: n }, (_, k) => ({ identifier: queue, payload: { i: from + k } }));
        return () => utils.addJobs(specs);
      },
      enqueueOne: (i) => utils.addJob(queue, { i }),
      count: () => utils.withPgClient((c) => count(c, queue)),
      close: async () => {
        await utils.release();
      },
    };
  },
};

const preset = (dsn: string) => ({ worker: { connectionString: dsn, ...GRAPHILE_WORKER } });

export async function childExec(args: ChildArgs): Promise<ExecResult> {
  const { n, queue } = args;
  const ledger = new RunLedger(n);
  let done = 0;
  let tHandlers = 0;
  let tFirst = 0;
  let allDone!: () => void;
  const finished = new Promise<void>((r) => (allDone = r));
  const task = async (payload: unknown) => {
    tFirst ||= now();
    ledger.hit((payload as { i: number }).i);
    if (++done === n) {
      tHandlers = now();
      allDone();
    }
  };
  const verify = new pg.Pool({ connectionString: args.verifyDsn, max: 1 });
  const t0 = now();
  const runner = await run({ taskList: { [queue]: task }, crontab: "", logger, preset: preset(args.dsn) });
  const tReady = now();
  await finished;
  // Completed jobs are deleted: done when no row is left.
  await waitFor(async () => (await count(verify, queue)) === 0, "all jobs deleted");
  const tDb = now();
  await runner.stop();
  const left = await count(verify, queue);
  const withError = (await verify.query<{ n: number }>("select count(*)::int as n from graphile_worker._private_jobs where last_error is not null")).rows[0]!.n;
  await verify.end();
  return {
    startup_ms: round(tFirst - t0, 1), // the first job's start, as for every library
    ready_ms: round(tReady - t0, 1),
    handlers_done_ms: round(tHandlers - t0, 1),
    exec_ms: round(tDb - t0, 1),
    jobs_per_s: round(n / ((tDb - t0) / 1000), 1),
    ledger: ledger.summary(),
    db_after: { jobs_left: left, jobs_with_error: withError },
    db_ok: left === 0 && withError === 0,
    peak_rss_mib: peakRssMiB(),
  };
}

export async function childHop(args: ChildArgs): Promise<HopResult> {
  const { n, queue } = args;
  const start: (number | null)[] = new Array(n).fill(null);
  // When each job's enqueue committed: the enqueue call returned (its insert's reply is the last thing it waits for).
  const committed: (number | null)[] = new Array(n).fill(null);
  const ledger = new RunLedger(n);
  let chainDone!: () => void;
  const finished = new Promise<void>((r) => (chainDone = r));
  const task = async (payload: unknown, helpers: { addJob: (id: string, p: unknown) => Promise<unknown> }) => {
    const i = (payload as { i: number }).i;
    start[i] = now();
    ledger.hit(i);
    if (i + 1 < n) {
      await helpers.addJob(queue, { i: i + 1 });
      committed[i + 1] = now();
    }
    if (i === n - 1) chainDone();
  };
  const verify = new pg.Pool({ connectionString: args.verifyDsn, max: 1 });
  const runner = await run({ taskList: { [queue]: task }, crontab: "", logger, preset: preset(args.dsn) });
  const t0 = now();
  await runner.addJob(queue, { i: 0 });
  await finished;
  const tChain = now();
  await waitFor(async () => (await count(verify, queue)) === 0, "hop jobs deleted");
  await runner.stop();
  await verify.end();
  const ledgerSummary = ledger.summary();
  return {
    chain_ms: round(tChain - t0, 1),
    ...hopStats(start, committed),
    ledger: ledgerSummary,
    db_ok: ledgerSummary.duplicates === 0 && ledgerSummary.missing === 0,
    peak_rss_mib: peakRssMiB(),
  };
}

/** Child: one of several processes draining the queue together (the scale-out phase): `slots` jobs at once, a pool of `poolSize`. */
export async function childDrain(args: ChildArgs): Promise<DrainResult> {
  return drainChild(async (hit) => {
    const worker = { ...preset(args.dsn).worker, concurrentJobs: args.slots, maxPoolSize: args.poolSize ?? GRAPHILE_WORKER.maxPoolSize };
    const task = async (payload: unknown) => {
      hit((payload as { i: number }).i);
      if (args.jobMs) await sleep(args.jobMs);
    };
    const runner = await run({ taskList: { [args.queue]: task }, crontab: "", logger, preset: { worker } });
    return () => runner.stop();
  }, args.stamp);
}
