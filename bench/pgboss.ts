import { PgBoss } from "pg-boss";
import pg from "pg";
import { peakRssMiB, type ChildArgs } from "./child-io.ts";
import { drainChild, type DrainResult } from "./drain-child.ts";
import { waitFor } from "./db.ts";
import { pkgVersion, type ExecResult, type HopResult, type Lib } from "./lib.ts";
import { hopStats, now, round, RunLedger } from "./stats.ts";

/** pg-boss 12 in its batched + LISTEN/NOTIFY configuration (the peers' `batched_notify`). */

export const PGBOSS_WORKER = { max: 22, useListenNotify: true };
export const PGBOSS_WORK = {
  localConcurrency: 1,
  batchSize: 20,
  burstWhenBatchFull: true,
  pollingIntervalSeconds: 0.5,
  notifyPollingIntervalSeconds: 0.5,
};

function attach(boss: PgBoss, tag: string): PgBoss {
  boss.on("error", (e: unknown) => console.error(`[pg-boss ${tag} error]`, (e as Error)?.message ?? e));
  boss.on("warning", (w: unknown) => console.error(`[pg-boss ${tag} warning]`, (w as Error)?.message ?? w));
  return boss;
}

const STATE = `select count(*)::int as total,
  count(*) filter (where state = 'completed')::int as completed,
  count(*) filter (where retry_count > 0)::int as retried,
  count(*) filter (where state in ('failed', 'retry'))::int as failed_or_retry
  from pgboss.job where name = $1`;
type State = { total: number; completed: number; retried: number; failed_or_retry: number };
const state = async (c: pg.Pool, name: string) => (await c.query<State>(STATE, [name])).rows[0]!;

export const pgboss: Lib = {
  id: "pgboss",
  name: "pg-boss",
  get version() {
    return pkgVersion("pg-boss");
  },
  settings:
    "batched_notify: work() localConcurrency 1, batchSize 20 (the 20 run concurrently), burstWhenBatchFull, pollingIntervalSeconds 0.5, notifyPollingIntervalSeconds 0.5; useListenNotify, queue notify; pool max 22; producer: insert / send",
  remaining: async (db, queue) =>
    (await db.query<{ n: number }>("select count(*)::int as n from pgboss.job where name = $1 and state <> 'completed'", [queue])).rows[0]!.n,
  async open(dsn, queue) {
    const boss = attach(new PgBoss({ connectionString: dsn, max: 22, supervise: false, schedule: false }), "producer");
    await boss.start();
    await boss.createQueue(queue, { notify: true });
    const verify = new pg.Pool({ connectionString: dsn, max: 1 });
    return {
      prepareBatch(n, from = 0) {
        const jobs = Array.from({ length: n }, (_, k) => ({ data: { i: from + k } }));
        return () => boss.insert(queue, jobs);
      },
      enqueueOne: (i) => boss.send(queue, { i }),
      count: async () => (await state(verify, queue)).total,
      close: async () => {
        await verify.end();
        await boss.stop({ graceful: false, timeout: 1000 });
      },
    };
  },
};

const workerBoss = (dsn: string) => attach(new PgBoss({ connectionString: dsn, ...PGBOSS_WORKER }), "worker");

export async function childExec(args: ChildArgs): Promise<ExecResult> {
  const { n, queue } = args;
  const ledger = new RunLedger(n);
  let done = 0;
  let tHandlers = 0;
  let allDone!: () => void;
  const finished = new Promise<void>((r) => (allDone = r));
  const task = async (_: unknown) => {};
  let tFirst = 0;
  const handler = async (jobs: { data: { i: number } }[]) => {
    tFirst ||= now();
    await Promise.all(jobs.map((j) => (ledger.hit(j.data.i), task(j.data))));
    done += jobs.length;
    if (done >= n && !tHandlers) {
      tHandlers = now();
      allDone();
    }
  };
  const verify = new pg.Pool({ connectionString: args.verifyDsn, max: 1 });
  const boss = workerBoss(args.dsn);
  const t0 = now();
  await boss.start();
  await boss.work(queue, PGBOSS_WORK, handler as never);
  const tReady = now();
  await finished;
  await waitFor(async () => (await state(verify, queue)).completed === n, "all jobs completed");
  const tDb = now();
  await boss.stop({ graceful: true, timeout: 5000 });
  const after = await state(verify, queue);
  await verify.end();
  return {
    startup_ms: round(tFirst - t0, 1), // the first job's start, as for every library
    ready_ms: round(tReady - t0, 1),
    handlers_done_ms: round(tHandlers - t0, 1),
    exec_ms: round(tDb - t0, 1),
    jobs_per_s: round(n / ((tDb - t0) / 1000), 1),
    ledger: ledger.summary(),
    db_after: after,
    db_ok: after.completed === n && after.retried === 0 && after.failed_or_retry === 0,
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
  const boss = workerBoss(args.dsn);
  const one = async (job: { data: { i: number } }) => {
    const i = job.data.i;
    start[i] = now();
    ledger.hit(i);
    if (i + 1 < n) {
      await boss.send(queue, { i: i + 1 });
      committed[i + 1] = now();
    }
    if (i === n - 1) chainDone();
  };
  const verify = new pg.Pool({ connectionString: args.verifyDsn, max: 1 });
  await boss.start();
  await boss.work(queue, PGBOSS_WORK, ((jobs: { data: { i: number } }[]) => Promise.all(jobs.map(one))) as never);
  const t0 = now();
  await boss.send(queue, { i: 0 });
  await finished;
  const tChain = now();
  await waitFor(async () => (await state(verify, queue)).completed === n, "hop jobs completed");
  const after = await state(verify, queue);
  await boss.stop({ graceful: true, timeout: 5000 });
  await verify.end();
  return {
    chain_ms: round(tChain - t0, 1),
    ...hopStats(start, committed),
    ledger: ledger.summary(),
    db_ok: after.completed === n && after.retried === 0,
    peak_rss_mib: peakRssMiB(),
  };
}

/** Child: one of several processes draining the queue together (the scale-out phase): batches of `slots`, a pool of `poolSize`. */
export async function childDrain(args: ChildArgs): Promise<DrainResult> {
  return drainChild(async (hit) => {
    const boss = attach(new PgBoss({ connectionString: args.dsn, ...PGBOSS_WORKER, max: args.poolSize ?? PGBOSS_WORKER.max }), "worker");
    await boss.start();
    const handler = async (jobs: unknown[]) => { for (const _ of jobs) hit(); };
    await boss.work(args.queue, { ...PGBOSS_WORK, batchSize: args.slots }, handler as never);
    return () => boss.stop({ graceful: true, timeout: 5000 });
  });
}
