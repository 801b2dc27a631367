import { runChild, type ChildLib } from "./children.ts";
import { checkpoint, dropDb, dsnFor, freshDb, type Route } from "./db.ts";
import type { ExecResult, HopResult, Lib, LibId } from "./lib.ts";
import { now, round } from "./stats.ts";

/**
 * The benchmark is a list of named phases. Each phase runs once per library
 * per run (runs are interleaved: run 1 of every phase and library, then run
 * 2 ...), returns a raw record, and names the metrics the summary takes the
 * median of. To add a scenario, add a Phase to the list in bench/plan.ts.
 */

export interface Sizes {
  /** Jobs enqueued in one call, then executed. */
  batch: number;
  /** Jobs enqueued one call each. */
  seq: number;
  /** Length of the hop chain. */
  hop: number;
  slots: number;
  /** Jobs drained by each process count of the scale-out phase. */
  scaleOut: number;
}

export interface BenchContext {
  adminDsn: string;
  sizes: Sizes;
  /** 1-based run number. */
  run: number;
  /** The latency relay, when a phase routes through it. */
  relay?: Route;
  /** Leasehold worker pool size and prefetch (undefined = the runner's default). */
  poolSize: number;
  prefetch?: number;
  log(message: string): void;
}

export type Raw = Record<string, unknown>;
type Metric = (raw: any) => number | null | undefined;

export interface Phase {
  name: string;
  title: string;
  /** Libraries this phase runs for. */
  libs: readonly LibId[];
  /** Run only in the first run (the phase repeats internally if it needs to). */
  once?: boolean;
  run(lib: Lib, ctx: BenchContext): Promise<Raw>;
  /** Metric name -> how to read it from one raw record; the summary holds the median over runs. */
  metrics: Record<string, Metric>;
  /** Exactly-once and database checks of one raw record; true when all pass. */
  check?(raw: any): boolean;
}

const dbName = (ctx: BenchContext, lib: Lib, phase: string) => `bench_${lib.id}_${phase.replace(/[^a-z0-9]/g, "_")}_r${ctx.run}`;
const routeOf = (ctx: BenchContext, viaRelay: boolean) => (viaRelay ? ctx.relay : undefined);

async function withDb<T>(ctx: BenchContext, name: string, fn: () => Promise<T>): Promise<T> {
  await freshDb(ctx.adminDsn, name);
  try {
    return await fn();
  } finally {
    await dropDb(ctx.adminDsn, name);
  }
}

export function childArgs(ctx: BenchContext, lib: Lib, db: string, queue: string, n: number, viaRelay: boolean, minId?: number) {
  return {
    dsn: dsnFor(ctx.adminDsn, db, routeOf(ctx, viaRelay)),
    verifyDsn: dsnFor(ctx.adminDsn, db),
    queue,
    n,
    minId,
    slots: ctx.sizes.slots,
    ...(lib.id === "leasehold" ? { poolSize: ctx.poolSize, prefetch: ctx.prefetch } : {}),
  };
}

const execOk = (r: { exec: ExecResult }) =>
  r.exec.db_ok && r.exec.ledger.duplicates === 0 && r.exec.ledger.missing === 0;

/** Enqueue `sizes.seq` jobs, one call (and implicit transaction) each. */
export function enqueueOneByOne(name: string, viaRelay: boolean, libs: readonly LibId[]): Phase {
  return {
    name,
    libs,
    title: `Enqueue one at a time${viaRelay ? " (through the latency relay)" : ""}`,
    async run(lib, ctx) {
      const db = dbName(ctx, lib, name);
      const n = ctx.sizes.seq;
      return withDb(ctx, db, async () => {
        const producer = await lib.open(dsnFor(ctx.adminDsn, db, routeOf(ctx, viaRelay)), "seq");
        try {
          await checkpoint(ctx.adminDsn);
          const t = now();
          for (let i = 0; i < n; i++) await producer.enqueueOne(i);
          const ms = now() - t;
          const count = await producer.count();
          if (count !== n) throw new Error(`${lib.id}: expected ${n} jobs, found ${count}`);
          return { jobs: n, total_ms: round(ms, 1), per_job_ms: round(ms / n, 3) };
        } finally {
          await producer.close();
        }
      });
    },
    metrics: { per_job_ms: (r) => r.per_job_ms, total_ms: (r) => r.total_ms },
  };
}

/** Enqueue `sizes.batch` jobs in one call, then a fresh worker child executes them. */
export function batchThenExecute(name: string, viaRelay: boolean, libs: readonly LibId[]): Phase {
  return {
    name,
    libs,
    title: `Enqueue a batch in one call, then execute it with a fresh worker${viaRelay ? " (through the latency relay)" : ""}`,
    async run(lib, ctx) {
      const db = dbName(ctx, lib, name);
      const n = ctx.sizes.batch;
      return withDb(ctx, db, async () => {
        const dsn = dsnFor(ctx.adminDsn, db, routeOf(ctx, viaRelay));
        const producer = await lib.open(dsn, "bench");
        let ms: number;
        try {
          const call = producer.prepareBatch(n);
          await checkpoint(ctx.adminDsn);
          const t = now();
          await call();
          ms = now() - t;
          const count = await producer.count();
          if (count !== n) throw new Error(`${lib.id}: expected ${n} jobs, found ${count}`);
        } finally {
          await producer.close();
        }
        const minId = await lib.firstId?.(dsnFor(ctx.adminDsn, db), "bench");
        await checkpoint(ctx.adminDsn);
        const exec = await runChild<ExecResult>(lib.id as ChildLib, "exec", childArgs(ctx, lib, db, "bench", n, viaRelay, minId));
        return { jobs: n, enqueue_batch_ms: round(ms, 1), exec };
      });
    },
    metrics: {
      enqueue_batch_ms: (r) => r.enqueue_batch_ms,
      exec_ms: (r) => r.exec.exec_ms,
      jobs_per_s: (r) => r.exec.jobs_per_s,
      peak_rss_mib: (r) => r.exec.peak_rss_mib,
      startup_ms: (r) => r.exec.startup_ms,
      queries_per_job: (r) => r.exec.extra?.queries_per_job,
    },
    check: execOk,
  };
}

/** A chain of `sizes.hop` jobs, each enqueuing the next from inside its handler. */
export function hopChain(name: string, viaRelay: boolean, libs: readonly LibId[]): Phase {
  return {
    name,
    libs,
    title: `Hop latency of a chain${viaRelay ? " (through the latency relay)" : ""}`,
    async run(lib, ctx) {
      const db = dbName(ctx, lib, name);
      return withDb(ctx, db, async () => {
        const producer = await lib.open(dsnFor(ctx.adminDsn, db), "hop");
        await producer.close();
        await checkpoint(ctx.adminDsn);
        const hop = await runChild<HopResult>(lib.id as ChildLib, "hop", childArgs(ctx, lib, db, "hop", ctx.sizes.hop, viaRelay));
        return { hop };
      });
    },
    metrics: {
      p50_ms: (r) => r.hop.p50_ms,
      p95_ms: (r) => r.hop.p95_ms,
      chain_ms: (r) => r.hop.chain_ms,
      peak_rss_mib: (r) => r.hop.peak_rss_mib,
    },
    check: (r: { hop: HopResult }) => r.hop.db_ok && r.hop.ledger.duplicates === 0 && r.hop.ledger.missing === 0,
  };
}
