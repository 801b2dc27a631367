import { readFileSync } from "node:fs";
import * as z from "zod";
import { namesAs, send, type NamedStatement, type Store } from "../shared/db/db.ts";
import { createPgPool } from "../shared/db/drivers/pg.ts";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob, type JobType } from "../shared/jobs/job.ts";
import { migrate } from "../shared/db/migrate.ts";
import { runWorker, type WorkerOptions } from "../shared/runner/worker.ts";
import { peakRssMiB, type ChildArgs } from "./child-io.ts";
import { drainChild, type DrainResult } from "./drain-child.ts";
import type { ExecResult, HopResult, Lib } from "./lib.ts";
import { hopStats, now, round, RunLedger, sleep } from "./stats.ts";
import { waitFor } from "./db.ts";

/** Leasehold under test: the real shared/ code, `runWorker` exactly as the Lambda runner calls it. */

const SCHEMA = "leasehold";
export const DEFAULT_POOL_SIZE = 8;
const payload = z.object({ i: z.number().int() });
const benchType = (queue: string, handler: JobType<typeof payload>["handler"] = () => {}) =>
  defineJob({ name: "bench", schema: payload, queue, handler });

export const leasehold: Lib = {
  id: "leasehold",
  name: "Leasehold",
  get version() {
    return (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version;
  },
  settings: `runWorker: slots 20, prefetch: the runner's default (adaptive), pg pool max ${DEFAULT_POOL_SIZE} in the worker; producer: enqueueJobs / enqueue; execute is timed to the commit of the last complete statement (as the worker sees it return), then verified in the database`,
  async open(dsn, queue) {
    const pool = createPgPool(dsn, 4);
    await migrate(pool, SCHEMA);
    const store: Store = { db: pool, schema: SCHEMA };
    const type = benchType(queue);
    return {
      prepareBatch(n, from = 0) {
        const specs = Array.from({ length: n }, (_, k) => job(type, { i: from + k }));
        return () => enqueueJobs(store, specs);
      },
      enqueueOne: (i) => enqueue(store, type, { i }),
      count: async () => (await pool.query<{ n: number }>(`select count(*)::int as n from ${SCHEMA}.jobs where queue = $1`, [queue])).rows[0]!.n,
      close: () => pool.end(),
    };
  },
  remaining: async (db, queue) =>
    (await db.query<{ n: number }>(`select count(*)::int as n from ${SCHEMA}.jobs where queue = $1 and status in ('queued', 'running')`, [queue])).rows[0]!.n,
  async firstId(dsn, queue) {
    const pool = createPgPool(dsn, 1);
    try {
      const { rows } = await pool.query<{ id: string }>(`select min(id)::text as id from ${SCHEMA}.jobs where queue = $1 and name = 'bench'`, [queue]);
      return Number(rows[0]!.id);
    } finally {
      await pool.end();
    }
  },
};

function workerOptions(args: ChildArgs, store: Store, types: JobType<any>[]) {
  let stopping = false;
  return {
    stop: () => (stopping = true),
    options: {
      store,
      registry: createRegistry(types),
      queues: [args.queue],
      runnerId: `bench-${process.pid}`,
      slots: args.slots,
      prefetch: args.prefetch,
      // Stays for the phase, however long the queue is empty (the hop chain starts after the worker).
      linger: "fixed",
      idleMs: 600_000,
      remainingMs: () => (stopping ? 0 : Number.POSITIVE_INFINITY),
      log: { info() {}, warn: (m: string, f?: object) => console.error("[leasehold warn]", m, f), error: (m: string, f?: object) => console.error("[leasehold error]", m, f) },
    } satisfies WorkerOptions,
  };
}

/** Child: executes the n queued jobs with ids [minId, minId + n). */
export async function childExec(args: ChildArgs): Promise<ExecResult> {
  const { n, minId = 1 } = args;
  const ledger = new RunLedger(n);
  let done = 0;
  let tHandlers = 0;
  let tFirst = 0;
  let allDone!: () => void;
  const finished = new Promise<void>((r) => (allDone = r));
  const type = benchType(args.queue, async ({ i }) => {
    tFirst ||= now();
    ledger.hit(i);
    // i >= n: a ready backlog job claimed once the jobs under test ran out.
    if (i < n && ++done === n) {
      tHandlers = now();
      allDone();
    }
  });
  const verify = createPgPool(args.verifyDsn, 1);
  const range = `id >= $1::bigint and id < $1::bigint + $2::int`;
  const succeeded = async () =>
    (await verify.query<{ n: number }>(`select count(*)::int as n from ${SCHEMA}.jobs where ${range} and status = 'succeeded'`, [minId, n])).rows[0]!.n;
  let queries = 0;
  const t0 = now();
  const pool = createPgPool(args.dsn, args.poolSize ?? DEFAULT_POOL_SIZE);
  // Counting only: the claim and the settle still go to the pool by name (`namesAs`).
  const counting = namesAs({ query: (text: string, values?: unknown[]) => (queries++, pool.query(text, values)) } as Store["db"], pool);
  const w = workerOptions(args, { db: counting, schema: SCHEMA }, [type]);
  // The clock stops when the database has committed all n successes: the
  // worker's own complete statements say so as they return (counted here),
  // rather than a poller re-counting 10,000 rows every 2 ms beside the work.
  // The database state is verified below all the same.
  let committed = 0;
  let allCommitted!: () => void;
  const durable = new Promise<void>((r) => (allCommitted = r));
  const worker = runWorker({
    ...w.options,
    onSettled: (e) => {
      const id = Number(e.jobId);
      if (e.accepted && e.outcome === "succeeded" && id >= minId && id < minId + n && ++committed === n) allCommitted();
    },
  });
  await finished;
  await durable;
  const tDb = now();
  if ((await succeeded()) !== n) throw new Error("the database does not show every job succeeded");
  w.stop();
  const summary = await worker;
  await pool.end();
  const { rows } = await verify.query<Record<string, number>>(
    `select count(*) filter (where status = 'succeeded')::int as succeeded,
            count(*) filter (where status <> 'succeeded')::int as not_succeeded,
            count(*) filter (where attempts <> 1)::int as attempts_not_1,
            (select count(*)::int from ${SCHEMA}.attempts where job_id >= $1::bigint and job_id < $1::bigint + $2::int) as attempt_rows
     from ${SCHEMA}.jobs where ${range}`,
    [minId, n],
  );
  await verify.end();
  const db = rows[0]!;
  return {
    startup_ms: round(tFirst - t0, 1), // no separate start call: time to the first job's start
    handlers_done_ms: round(tHandlers - t0, 1),
    exec_ms: round(tDb - t0, 1),
    jobs_per_s: round(n / ((tDb - t0) / 1000), 1),
    ledger: ledger.summary(),
    db_after: db,
    db_ok: db.succeeded === n && db.not_succeeded === 0 && db.attempts_not_1 === 0 && db.attempt_rows === n,
    peak_rss_mib: peakRssMiB(),
    extra: { pool_size: args.poolSize ?? DEFAULT_POOL_SIZE, queries, queries_per_job: round(queries / n, 3), summary },
  };
}

/**
 * Child: a chain of n jobs, each enqueuing the next with ctx.enqueue. The
 * follow-up may be inserted already claimed by this runner and start before
 * the enqueue call returns to its parent, so its commit is stamped where the
 * insert's reply arrives: at the Queryable seam, before any Leasehold code
 * sees it.
 */
export async function childHop(args: ChildArgs): Promise<HopResult> {
  const { n } = args;
  const start: (number | null)[] = new Array(n).fill(null);
  const committed: (number | null)[] = new Array(n).fill(null);
  const ledger = new RunLedger(n);
  let chainDone!: () => void;
  const finished = new Promise<void>((r) => (chainDone = r));
  // The chain is sequential: the one job being enqueued now.
  let enqueuing = 0;
  const hop: JobType<typeof payload> = defineJob({
    name: "hop",
    schema: payload,
    queue: args.queue,
    handler: async ({ i }, ctx) => {
      start[i] = now();
      ledger.hit(i);
      if (i + 1 < n) {
        enqueuing = i + 1;
        await ctx.enqueue(hop, { i: i + 1 });
      }
      if (i === n - 1) chainDone();
    },
  });
  const pool = createPgPool(args.dsn, args.poolSize ?? DEFAULT_POOL_SIZE);
  const INSERT = /^\s*insert into \S*jobs\b/;
  // Statements come as text, or by name (`hotQuery`: the claim, the settle, the enqueue's inserts).
  const stamping = namesAs({
    query: (text: string | NamedStatement, values?: unknown[]) => {
      const reply = send(pool, text, values);
      return INSERT.test(typeof text === "string" ? text : text.text) ? reply.then((r) => ((committed[enqueuing] ??= now()), r)) : reply;
    },
  } as Store["db"], pool);
  const store: Store = { db: stamping, schema: SCHEMA };
  const w = workerOptions(args, store, [hop]);
  const worker = runWorker(w.options);
  const t0 = now();
  await enqueue(store, hop, { i: 0 });
  await finished;
  const tChain = now();
  const verify = createPgPool(args.verifyDsn, 1);
  const q = `select count(*) filter (where status = 'succeeded' and attempts = 1)::int as ok, count(*)::int as total from ${SCHEMA}.jobs where queue = $1`;
  await waitFor(async () => (await verify.query<{ ok: number }>(q, [args.queue])).rows[0]!.ok === n, "hop jobs succeeded");
  const db = (await verify.query<{ ok: number; total: number }>(q, [args.queue])).rows[0]!;
  await verify.end();
  w.stop();
  await worker;
  await pool.end();
  return {
    chain_ms: round(tChain - t0, 1),
    ...hopStats(start, committed),
    ledger: ledger.summary(),
    db_ok: db.ok === n && db.total === n,
    peak_rss_mib: peakRssMiB(),
  };
}

/** Child: one of several processes draining the queue together (the scale-out phase). */
export async function childDrain(args: ChildArgs): Promise<DrainResult> {
  return drainChild(async (hit) => {
    const pool = createPgPool(args.dsn, args.poolSize ?? DEFAULT_POOL_SIZE);
    const handler = async ({ i }: { i: number }) => {
      hit(i);
      if (args.jobMs) await sleep(args.jobMs);
    };
    const w = workerOptions(args, { db: pool, schema: SCHEMA }, [benchType(args.queue, handler)]);
    const worker = runWorker({ ...w.options, bell: args.bell ?? false });
    return async () => {
      w.stop();
      await worker;
      await pool.end();
    };
  }, args.stamp);
}
