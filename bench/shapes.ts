import pg from "pg";
import type { ChildLib } from "./children.ts";
import { checkpoint, dropDb, dsnFor, freshDb } from "./db.ts";
import { epochMs, type DrainResult } from "./drain-child.ts";
import { startDrainFleet } from "./drain-fleet.ts";
import type { Lib, LibId, Producer } from "./lib.ts";
import { backendCpu, waitNoBackends, xactCommits } from "./db-activity.ts";
import type { BenchContext, Phase } from "./phases.ts";
import { now, percentile, round, sleep } from "./stats.ts";

/**
 * Job shapes: the execute lead measured on no-op jobs, 20 slots and a queue
 * filled at once holds only for that shape. These phases run the shapes users
 * bring, each a worker process (or several) against Leasehold and
 * graphile-worker in turn:
 * - `batch`: the jobs queued at once, then drained; jobs/s, start to done.
 * - `steady`: one job every 1,000 / `perSecond` ms, each its own enqueue call,
 *   into a worker already running and idle; the wait from the enqueue call
 *   to the handler's start.
 * - `bursts`: `burst` jobs in one call every `everyMs`, likewise.
 * A job's handler awaits `jobMs` (as a call to another service would).
 * Leasehold's worker runs with its bell on, as the Lambda runner does with
 * its default connections; both libraries get the same pool.
 */

export interface Shape {
  name: string;
  label: string;
  jobMs: number;
  slots: number;
  processes: number;
  jobs: number;
  arrival: { kind: "batch" } | { kind: "steady"; perSecond: number } | { kind: "bursts"; burst: number; everyMs: number };
}

export const SHAPES: readonly Shape[] = [
  { name: "shape-5ms", label: "5 ms jobs, 20 slots, 4,000 queued", jobMs: 5, slots: 20, processes: 1, jobs: 4_000, arrival: { kind: "batch" } },
  { name: "shape-20ms-100", label: "20 ms jobs, 100 slots, 10,000 queued", jobMs: 20, slots: 100, processes: 1, jobs: 10_000, arrival: { kind: "batch" } },
  { name: "shape-noop-5", label: "no-op jobs, 5 slots, 10,000 queued", jobMs: 0, slots: 5, processes: 1, jobs: 10_000, arrival: { kind: "batch" } },
  { name: "shape-5ms-4x10", label: "5 ms jobs, 4 processes × 10 slots, 8,000 queued", jobMs: 5, slots: 10, processes: 4, jobs: 8_000, arrival: { kind: "batch" } },
  { name: "shape-steady", label: "5 ms jobs, 20 slots, 250 a second one call each, 1,000 jobs", jobMs: 5, slots: 20, processes: 1, jobs: 1_000, arrival: { kind: "steady", perSecond: 250 } },
  { name: "shape-bursts", label: "5 ms jobs, 20 slots, bursts of 200 in one call every 500 ms, 1,000 jobs", jobMs: 5, slots: 20, processes: 1, jobs: 1_000, arrival: { kind: "bursts", burst: 200, everyMs: 500 } },
];

/** Connections per worker process, both libraries: at least this, and up to 22 (graphile-worker asks for its concurrency + 2). */
export const SHAPE_POOL = 10;

export interface ShapeRecord {
  shape: Shape;
  exec_ms: number;
  jobs_per_s: number;
  /** Arriving shapes: enqueue call to handler start, ms. */
  wait_p50_ms: number | null;
  wait_p95_ms: number | null;
  wait_max_ms: number | null;
  handler_calls: number;
  /** Distinct jobs whose start a child reported (arriving shapes), else null. */
  distinct_started: number | null;
  remaining_after: number;
  cpu_ms: number;
  /** CPU of the database's backends during the run (the workers', and the producer's for arriving shapes), ms. */
  pg_cpu_ms: number;
  /** The workers' commits a job (pg_stat_database): how many statements the work took. */
  commits_per_job: number;
  peak_rss_mib: number;
  /** Each process's handler runs and CPU, ms. */
  children: { handler_calls: number; cpu_ms: number }[];
}

/** Enqueues the arriving jobs on their schedule; returns each job's enqueue-call time (epoch ms) by index, and the calls made. */
async function arrive(producer: Producer, shape: Shape): Promise<{ at: number[]; calls: number }> {
  const at = new Array<number>(shape.jobs);
  let calls = 0;
  const t0 = now();
  if (shape.arrival.kind === "steady") {
    const gap = 1_000 / shape.arrival.perSecond;
    for (let i = 0; i < shape.jobs; i++) {
      const wait = t0 + i * gap - now();
      if (wait > 1) await sleep(wait);
      at[i] = epochMs();
      await producer.enqueueOne(i);
      calls++;
    }
  } else if (shape.arrival.kind === "bursts") {
    const { burst, everyMs } = shape.arrival;
    for (let from = 0, k = 0; from < shape.jobs; from += burst, k++) {
      const wait = t0 + k * everyMs - now();
      if (wait > 1) await sleep(wait);
      const count = Math.min(burst, shape.jobs - from);
      const call = producer.prepareBatch(count, from);
      at.fill(epochMs(), from, from + count);
      await call();
      calls++;
    }
  }
  return { at, calls };
}

async function runShape(lib: Lib, ctx: BenchContext, shape: Shape): Promise<ShapeRecord & Record<string, unknown>> {
  const db = `bench_${lib.id}_${shape.name.replace(/[^a-z0-9]/g, "_")}_r${ctx.run}`;
  await freshDb(ctx.adminDsn, db);
  try {
    const dsn = dsnFor(ctx.adminDsn, db);
    const batch = shape.arrival.kind === "batch";
    const producer = await lib.open(dsn, "bench");
    if (batch) await producer.prepareBatch(shape.jobs)();
    await checkpoint(ctx.adminDsn);
    const fleet = await startDrainFleet(lib.id as ChildLib, shape.processes, {
      dsn, verifyDsn: dsn, queue: "bench", n: shape.jobs, slots: shape.slots, poolSize: Math.max(SHAPE_POOL, Math.min(shape.slots + 2, 22)),
      jobMs: shape.jobMs, stamp: !batch, bell: true,
    });
    // Commits counted from here: the workers', less the driver's polls and enqueue calls.
    const before = await xactCommits(ctx.adminDsn, db);
    const poller = new pg.Client({ connectionString: dsn });
    await poller.connect();
    let polls = 0;
    const cpuBefore = await backendCpu(poller, db);
    fleet.go();
    // An arriving shape starts on workers that are up and idle.
    if (!batch) await sleep(500);
    const t0 = now();
    const arrived = batch ? null : await arrive(producer, shape);
    const enqueuedAt = arrived?.at ?? null;
    while (fleet.calls() < shape.jobs) {
      if (now() - t0 > 300_000) throw new Error(`${lib.id} ${shape.name}: ${fleet.calls()} of ${shape.jobs} handlers ran in 5 minutes`);
      await sleep(5);
    }
    let remaining: number;
    while (polls++, (remaining = await lib.remaining(poller, "bench")) > 0) {
      if (now() - t0 > 300_000) throw new Error(`${lib.id} ${shape.name}: ${remaining} jobs not done after 5 minutes`);
      await sleep(2);
    }
    const execMs = now() - t0;
    // Before the workers stop, while their backends live; a backend that connected after GO counts from 0.
    let pgCpuMs = 0;
    for (const [pid, ms] of await backendCpu(poller, db)) pgCpuMs += ms - (cpuBefore.get(pid) ?? 0);
    const children: DrainResult[] = await fleet.stop();
    await poller.end();
    await producer.close();
    await waitNoBackends(ctx.adminDsn, db);
    const commits = (await xactCommits(ctx.adminDsn, db)) - before - polls - (arrived?.calls ?? 0);
    const waits: number[] = [];
    const started = new Set<number>();
    if (enqueuedAt) {
      for (const c of children) {
        const s = c.starts ?? [];
        for (let k = 0; k < s.length; k += 2) {
          const i = s[k]!;
          started.add(i);
          if (enqueuedAt[i] !== undefined) waits.push(s[k + 1]! - enqueuedAt[i]!);
        }
      }
    }
    const q = (p: number) => (waits.length ? round(percentile(waits, p)!, 2) : null);
    return {
      shape,
      exec_ms: round(execMs, 1),
      jobs_per_s: round(shape.jobs / (execMs / 1000), 1),
      wait_p50_ms: q(50),
      wait_p95_ms: q(95),
      wait_max_ms: q(100),
      handler_calls: children.reduce((a, c) => a + c.handler_calls, 0),
      distinct_started: enqueuedAt ? started.size : null,
      remaining_after: remaining,
      cpu_ms: round(children.reduce((a, c) => a + c.cpu_ms, 0), 1),
      commits_per_job: round(commits / shape.jobs, 3),
      pg_cpu_ms: round(pgCpuMs, 1),
      peak_rss_mib: Math.max(...children.map((c) => c.peak_rss_mib)),
      children: children.map((c) => ({ handler_calls: c.handler_calls, cpu_ms: c.cpu_ms })),
    };
  } finally {
    await dropDb(ctx.adminDsn, db);
  }
}

export function shapePhase(shape: Shape, libs: readonly LibId[] = ["leasehold", "graphile"]): Phase {
  return {
    name: shape.name,
    title: `Job shape: ${shape.label}`,
    libs,
    async run(lib, ctx) {
      const r = await runShape(lib, ctx, shape);
      ctx.log(`  ${shape.name}: ${r.jobs_per_s} jobs/s${r.wait_p50_ms == null ? "" : `, wait p50 ${r.wait_p50_ms} ms p95 ${r.wait_p95_ms} ms`}`);
      return r;
    },
    metrics: {
      jobs_per_s: (r) => r.jobs_per_s,
      wait_p50_ms: (r) => r.wait_p50_ms,
      wait_p95_ms: (r) => r.wait_p95_ms,
      cpu_ms_per_1k: (r) => round((r.cpu_ms / r.shape.jobs) * 1000, 1),
      commits_per_job: (r) => r.commits_per_job,
      pg_cpu_ms_per_1k: (r) => round((r.pg_cpu_ms / r.shape.jobs) * 1000, 1),
    },
    // Exactly once: as many handler runs as jobs, none left in the database, and (where starts are reported) each job started.
    check: (r: ShapeRecord) =>
      r.handler_calls === r.shape.jobs && r.remaining_after === 0 && (r.distinct_started == null || r.distinct_started === r.shape.jobs),
  };
}

export const shapePhases: Phase[] = SHAPES.map((s) => shapePhase(s));
