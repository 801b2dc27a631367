import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * A fleet of fault-worker processes (test/fixtures/fault-worker.ts) kept at a
 * fixed size, the way Lambda keeps invoking runners while there is work: a
 * worker that exits, for any reason, is replaced after `restartDelayMs`
 * until `stop()`. Every process is recorded: pid, oracle file, exit code or
 * signal, the tail of its stderr, and whether the test killed it.
 */

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const WORKER = fileURLToPath(new URL("../fixtures/fault-worker.ts", import.meta.url));

export interface WorkerProcess {
  pid: number;
  oracle: string;
  startedAt: number;
  exit: { code: number | null; signal: string | null; at: number } | null;
  /** The last 64 KiB of stderr. */
  stderr: string;
  /** SIGKILLed by the test on purpose (`killOne`). */
  killed: boolean;
  /** Still running at `stop()` after the grace period, and SIGKILLed then. */
  hung: boolean;
}

export interface FleetOptions {
  size: number;
  /** Folder for the oracle files, one per process. */
  dir: string;
  databaseUrl: string;
  schema: string;
  slots: number;
  prefetch?: number;
  poolSize?: number;
  idleMs?: number;
  restartDelayMs?: number;
  /** Spawns at most this many processes in all (a crash loop stops here). */
  maxSpawns?: number;
  /** More environment for each worker (the fault worker's FAULT_LEASE_MS, FAULT_QUERY_TIMEOUT_MS, FAULT_BLOCK_MS). */
  env?: Record<string, string>;
  /** The worker script; default test/fixtures/fault-worker.ts. */
  script?: string;
}

export interface Fleet {
  processes: WorkerProcess[];
  oracles(): string[];
  live(): WorkerProcess[];
  /** SIGKILLs one live worker that has started handlers, chosen at random (null if none has); it is replaced like any other. */
  killOne(): WorkerProcess | null;
  /** Stops replacing, waits up to `graceMs` for the workers to exit, SIGKILLs (and marks hung) the rest. */
  stop(graceMs: number): Promise<void>;
}

/** A worker that exited on its own with a nonzero code or a signal: a crash. */
export const crashed = (p: WorkerProcess) =>
  !p.killed && !p.hung && p.exit !== null && (p.exit.code !== 0 || p.exit.signal !== null);

export function startFleet(options: FleetOptions): Fleet {
  const processes: WorkerProcess[] = [];
  const children = new Map<WorkerProcess, ChildProcess>();
  const maxSpawns = options.maxSpawns ?? 100;
  let stopping = false;
  let spawned = 0;
  const pendingRestarts = new Set<NodeJS.Timeout>();

  const spawnOne = () => {
    if (stopping || spawned >= maxSpawns) return;
    const oracle = join(options.dir, `worker-${spawned++}.jsonl`);
    const child = spawn(process.execPath, ["--import", "tsx", options.script ?? WORKER], {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "pipe"],
      env: {
        ...process.env,
        FAULT_DATABASE_URL: options.databaseUrl,
        FAULT_SCHEMA: options.schema,
        FAULT_ORACLE: oracle,
        FAULT_SLOTS: String(options.slots),
        FAULT_POOL: String(options.poolSize ?? 4),
        FAULT_IDLE_MS: String(options.idleMs ?? 1_000),
        ...(options.prefetch !== undefined ? { FAULT_PREFETCH: String(options.prefetch) } : {}),
        ...options.env,
      },
    });
    const record: WorkerProcess = { pid: child.pid!, oracle, startedAt: Date.now(), exit: null, stderr: "", killed: false, hung: false };
    processes.push(record);
    children.set(record, child);
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (record.stderr = (record.stderr + d).slice(-65_536)));
    child.on("exit", (code, signal) => {
      record.exit = { code, signal, at: Date.now() };
      children.delete(record);
      if (stopping) return;
      const timer = setTimeout(() => (pendingRestarts.delete(timer), spawnOne()), options.restartDelayMs ?? 300);
      pendingRestarts.add(timer);
    });
  };
  for (let i = 0; i < options.size; i++) spawnOne();

  return {
    processes,
    oracles: () => processes.map((p) => p.oracle),
    live: () => [...children.keys()],
    killOne() {
      // A worker still loading holds nothing: killing it tests nothing.
      const live = [...children.keys()].filter((p) => existsSync(p.oracle) && statSync(p.oracle).size > 0);
      const victim = live[Math.floor(Math.random() * live.length)];
      if (!victim) return null;
      victim.killed = true;
      children.get(victim)!.kill("SIGKILL");
      return victim;
    },
    async stop(graceMs) {
      stopping = true;
      for (const t of pendingRestarts) clearTimeout(t);
      const deadline = Date.now() + graceMs;
      while (children.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const exits = [...children.entries()].map(([record, child]) => {
        record.hung = true;
        child.kill("SIGKILL");
        return new Promise((r) => child.once("exit", r));
      });
      await Promise.all(exits);
    },
  };
}
