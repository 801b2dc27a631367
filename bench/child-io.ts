import { readFileSync } from "node:fs";

/** The child side of the driver/child protocol: one `RESULT {json}` line on stdout. */

/** Peak resident set size of this process (VmHWM from /proc/self/status), in MiB. */
export function peakRssMiB(): number {
  try {
    const m = /VmHWM:\s+(\d+)\s+kB/.exec(readFileSync("/proc/self/status", "utf8"));
    if (m) return Math.round((Number(m[1]) / 1024) * 10) / 10;
  } catch {
    // not Linux
  }
  return Math.round((process.resourceUsage().maxRSS / 1024) * 10) / 10;
}

/**
 * Prints the result line and exits, so no stray timer of a library keeps the
 * child alive. The line carries the child's own CPU time (`process_cpu_us`,
 * user + system, whole life) for the per-job budget.
 */
export function emitAndExit(result: unknown, code = 0): void {
  const cpu = process.cpuUsage();
  const out = result && typeof result === "object" ? { ...result, process_cpu_us: { user: cpu.user, system: cpu.system } } : result;
  process.stdout.write(`RESULT ${JSON.stringify(out)}\n`, () => process.exit(code));
}

/** What the driver hands a worker child (as JSON in argv). */
export interface ChildArgs {
  /** Where the worker connects (direct, or through the relay). */
  dsn: string;
  /** Where the child checks the database state (always direct). */
  verifyDsn: string;
  queue: string;
  /** Jobs to execute, or the chain length for a hop run. */
  n: number;
  /** Leasehold: ids of the jobs under test are in [minId, minId + n). */
  minId?: number;
  /** The worker's pool size (Leasehold; every library in a drain). */
  poolSize?: number;
  /** Leasehold: jobs claimed ahead of the free slots (default: the runner's adaptive prefetch). */
  prefetch?: number;
  slots: number;
  /** Drain: each handler waits this long (an awaited call, as a handler's I/O), ms. */
  jobMs?: number;
  /** Drain: the child reports when each job `i` started (`DrainResult.starts`). */
  stamp?: boolean;
  /** Drain, Leasehold: the bell on, as the Lambda runner runs with its default connections. */
  bell?: boolean;
}
