import { execFileSync } from "node:child_process";
import os from "node:os";
import { buildChildren } from "./children.ts";
import { serverInfo, type ServerInfo } from "./db.ts";
import { waitQuiet } from "./hostload.ts";
import { DEFAULT_POOL_SIZE, leasehold } from "./leasehold.ts";
import { startLatencyRelay } from "./latency-relay.ts";
import { LIB_IDS, type Lib, type LibId } from "./lib.ts";
import type { BenchContext, Phase, Raw, Sizes } from "./phases.ts";
import { round, stat, type Stat } from "./stats.ts";

/** Runs a plan of phases, interleaved over runs, and returns the results object the report reads. */

/**
 * A library under test. The peers are imported only when measured: they live
 * in bench/node_modules, installed by `npm run bench` (bench/install-peers.mjs),
 * not by the main install.
 */
export async function loadLib(id: LibId): Promise<Lib> {
  if (id === "leasehold") return leasehold;
  try {
    return id === "graphile" ? (await import("./graphile.ts")).graphile : (await import("./pgboss.ts")).pgboss;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ERR_MODULE_NOT_FOUND") throw err;
    throw new Error(`${id}: the benchmark's peers are not installed (${(err as Error).message}); npm run bench installs them, or: node bench/install-peers.mjs`);
  }
}

export interface BenchOptions {
  adminDsn: string;
  plan: Phase[];
  runs: number;
  sizes: Sizes;
  libs?: readonly LibId[];
  relayDelayMs?: number;
  poolSize?: number;
  prefetch?: number;
  quick?: boolean;
  /** Wait before each phase run until the host is below this busy fraction (0 = don't wait). */
  quietBusy?: number;
  log?: (message: string) => void;
  /** Called after every run of a phase, e.g. to save partial results. */
  onProgress?: (results: BenchResults) => void;
}

export interface PhaseResult {
  title: string;
  libs: LibId[];
  /** Raw records per library, one per run (or an error). */
  runs: Partial<Record<LibId, (Raw | { error: string })[]>>;
  /** Median/min/max over the successful runs, per metric. */
  summary: Partial<Record<LibId, Record<string, Stat | null>>>;
  /** Exactly-once and database checks passed in every run (null when the phase has none). */
  checks_ok: Partial<Record<LibId, boolean | null>>;
  /** Each metric's value per run, in run order (null for a failed run): run i of every library is the same round, so ratios pair by index. */
  per_run?: Partial<Record<LibId, Record<string, (number | null)[]>>>;
}

export interface BenchResults {
  meta: {
    date: string;
    quick: boolean;
    runs: number;
    sizes: Sizes;
    node: string;
    machine: { cpu_model: string; cores: number; mem_gib: number; kernel: string; platform: string };
    postgres: ServerInfo;
    libs: Record<string, { name: string; version: string; settings: string }>;
    leasehold_pool_size: number;
    leasehold_prefetch: number | null;
    relay: { delay_ms_each_way: number; measured_rtt_ms?: { direct: number; relay: number } } | null;
    git: { commit: string; shared_dirty: boolean } | null;
    method: string[];
  };
  phases: Record<string, PhaseResult>;
}

function gitInfo() {
  try {
    const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--", "shared", "migrations"], { encoding: "utf8" }).trim() !== "";
    return { commit, shared_dirty: dirty };
  } catch {
    return null;
  }
}

export const METHOD = [
  "Each library gets its own freshly created database for every phase of every run (dropped afterwards); CHECKPOINT before every timed phase.",
  "Jobs are empty async functions; one worker child process (plain node on an esbuild bundle of bench/worker-child.ts) runs 20 jobs at once.",
  "Enqueue batch: one call (Leasehold enqueueJobs, graphile-worker addJobs, pg-boss insert), timed around the call, array built beforehand. Enqueue one by one: one call and implicit transaction per job.",
  "Execute: timer from just before the worker starts to when the database shows every job done (after the last handler returned, the child polls every 2 ms). Exactly-once: per-job run counter in the worker plus the database state afterwards.",
  "Hop: a chain where each job enqueues the next from inside its handler; hop = start of the follow-up's handler − the commit of its enqueue, both stamped in the worker, so it cannot be negative (a job cannot start before its insert commits; any negative hop is counted, not hidden). The commit is when the insert's reply arrives: for Leasehold stamped at its Queryable seam (a follow-up may be inserted already claimed by the same runner and start before the enqueue call returns to its parent), for graphile-worker and pg-boss when addJob / send returns (the reply is the last thing they wait for). p50/p95 by linear interpolation.",
  "Scale-out: the same queued jobs drained by 1, 2, 4 and 8 worker processes of 10 slots each (pool of 10 connections each, every library), all loaded first and started together, timed until the database shows every job done; commits per job from pg_stat_database.xact_commit of the library's database (setup excluded, the driver's own polls subtracted); WAL/IO wait share from pg_stat_activity sampled every ~10 ms on another database.",
  "Peak RSS: VmHWM of the worker child (from /proc/self/status at its end).",
  "Network: the same phases with every worker/producer connection through one TCP relay on 127.0.0.1 that delays each chunk by the relay delay each way, in order.",
  "Host noise: before each phase run the driver waits (at most 2 min) until the whole host is nearly idle, and records how busy it was (`host` in each raw record).",
  "Runs are interleaved (run 1 of every phase and library, then run 2 ...); figures are the median of the runs.",
  "Per-job budget (phase budget): counted, not timed: the wire through a counting proxy (statements, round trips, Parse messages, transactions, bytes; backend CPU from /proc/<pid>/schedstat, by statement), the WAL of the library's own database read back with pg_walinspect (heap tuples, B-tree entries, bytes), pg_stat_user_tables as the cross-check; worker CPU from its first job to its exit. Needs a superuser DSN and pg_walinspect (PostgreSQL 15 or newer).",
];

async function measureRtt(dsn: string, samples = 50): Promise<number> {
  const { withClient } = await import("./db.ts");
  return withClient(dsn, async (c) => {
    await c.query("select 1");
    const times: number[] = [];
    for (let i = 0; i < samples; i++) {
      const t = performance.now();
      await c.query("select 1");
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    return round(times[Math.floor(times.length / 2)]!, 3);
  });
}

export async function runBench(options: BenchOptions): Promise<BenchResults> {
  const log = options.log ?? (() => {});
  const libs = options.libs ?? [...LIB_IDS];
  const LIBS = Object.fromEntries(await Promise.all(libs.map(async (id) => [id, await loadLib(id)] as const))) as Record<LibId, Lib>;
  const needsRelay = options.plan.some((p) => p.name.startsWith("net-"));
  const delay = options.relayDelayMs ?? 2;
  const admin = new URL(options.adminDsn);
  const relay = needsRelay ? await startLatencyRelay({ host: admin.hostname, port: Number(admin.port || 5432) }, delay) : null;
  await buildChildren();

  const results: BenchResults = {
    meta: {
      date: new Date().toISOString(),
      quick: !!options.quick,
      runs: options.runs,
      sizes: options.sizes,
      node: process.version,
      machine: {
        cpu_model: os.cpus()[0]?.model ?? "unknown",
        cores: os.cpus().length,
        mem_gib: round(os.totalmem() / 2 ** 30, 1),
        kernel: os.release(),
        platform: `${os.platform()} ${os.arch()}`,
      },
      postgres: await serverInfo(options.adminDsn),
      libs: Object.fromEntries(libs.map((id) => [id, { name: LIBS[id].name, version: LIBS[id].version, settings: LIBS[id].settings }])),
      leasehold_pool_size: options.poolSize ?? DEFAULT_POOL_SIZE,
      leasehold_prefetch: options.prefetch ?? null,
      relay: relay ? { delay_ms_each_way: delay } : null,
      git: gitInfo(),
      method: METHOD,
    },
    phases: {},
  };
  if (relay) {
    const { dsnFor } = await import("./db.ts");
    const db = admin.pathname.slice(1) || "postgres";
    results.meta.relay!.measured_rtt_ms = {
      direct: await measureRtt(options.adminDsn),
      relay: await measureRtt(dsnFor(options.adminDsn, db, relay)),
    };
  }

  for (const phase of options.plan) {
    const phaseLibs = phase.libs.filter((l) => libs.includes(l));
    results.phases[phase.name] = { title: phase.title, libs: phaseLibs, runs: {}, summary: {}, checks_ok: {} };
  }
  try {
    for (let run = 1; run <= options.runs; run++) {
      for (const phase of options.plan) {
        if (phase.once && run > 1) continue;
        const pr = results.phases[phase.name]!;
        for (const id of pr.libs) {
          const ctx: BenchContext = {
            adminDsn: options.adminDsn,
            sizes: options.sizes,
            run,
            relay: relay ?? undefined,
            poolSize: options.poolSize ?? DEFAULT_POOL_SIZE,
            prefetch: options.prefetch,
            log,
          };
          log(`run ${run}/${options.runs} ${phase.name} ${id} ...`);
          let raw: Raw | { error: string };
          const gate = options.quietBusy ? await waitQuiet(options.quietBusy, 120_000, log) : null;
          try {
            raw = await phase.run(LIBS[id], ctx);
            if (gate) raw.host = gate;
            log(`  ${brief(phase, raw)}`);
          } catch (err) {
            raw = { error: String((err as Error)?.stack ?? err).slice(0, 2000) };
            log(`  FAILED: ${raw.error}`);
          }
          (pr.runs[id] ??= []).push(raw);
          summarise(phase, pr, id);
          options.onProgress?.(results);
        }
      }
    }
  } finally {
    await relay?.close();
  }
  return results;
}

function summarise(phase: Phase, pr: PhaseResult, id: LibId): void {
  const runs = pr.runs[id] ?? [];
  const ok = runs.filter((r): r is Raw => !("error" in r));
  const value = (read: (r: Raw) => unknown, r: Raw | { error: string }) => {
    if ("error" in r) return null;
    try { const v = read(r); return typeof v === "number" && Number.isFinite(v) ? v : null; } catch { return null; }
  };
  pr.summary[id] = Object.fromEntries(Object.entries(phase.metrics).map(([name, read]) => [name, stat(ok.map((r) => value(read, r)))]));
  (pr.per_run ??= {})[id] = Object.fromEntries(Object.entries(phase.metrics).map(([name, read]) => [name, runs.map((r) => value(read, r))]));
  pr.checks_ok[id] = phase.check ? ok.length > 0 && ok.length === (pr.runs[id] ?? []).length && ok.every((r) => phase.check!(r)) : null;
}

function brief(phase: Phase, raw: Raw): string {
  return Object.entries(phase.metrics)
    .map(([k, read]) => {
      try {
        const v = read(raw);
        return v == null ? null : `${k}=${v}`;
      } catch {
        return null;
      }
    })
    .filter(Boolean)
    .join(" ") + (phase.check ? ` ok=${phase.check(raw)}` : "");
}
