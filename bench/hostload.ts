import { readFileSync } from "node:fs";
import { sleep } from "./stats.ts";

/**
 * Other work on the host distorts every figure (this machine is shared with
 * test runs and builds). Before each timed phase the driver waits, bounded,
 * until the whole host is nearly idle (the benchmark itself is idle between
 * phases), and records how busy it was.
 */

function cpuTimes(): { busy: number; total: number } | null {
  try {
    const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3]! + (f[4] ?? 0);
    const total = f.reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

/** Fraction of all cores busy over `ms`, or null off Linux. */
export async function hostBusy(ms = 500): Promise<number | null> {
  const a = cpuTimes();
  await sleep(ms);
  const b = cpuTimes();
  if (!a || !b || b.total === a.total) return null;
  return (b.busy - a.busy) / (b.total - a.total);
}

export interface QuietGate {
  /** Busy fraction of the host just before the phase started. */
  busy_before: number | null;
  waited_ms: number;
  /** True when the host never got quiet within the bound. */
  gave_up: boolean;
}

/** Waits until the host is below `maxBusy` (fraction of all cores) for one sample, at most `maxWaitMs`. */
export async function waitQuiet(maxBusy = 0.15, maxWaitMs = 120_000, log?: (m: string) => void): Promise<QuietGate> {
  const t0 = Date.now();
  let lastLog = 0;
  for (;;) {
    const busy = await hostBusy();
    if (busy == null || busy <= maxBusy) return { busy_before: busy, waited_ms: Date.now() - t0, gave_up: false };
    if (Date.now() - t0 > maxWaitMs) return { busy_before: busy, waited_ms: Date.now() - t0, gave_up: true };
    if (Date.now() - lastLog > 15_000) {
      log?.(`  host busy (${Math.round(busy * 100)}% of all cores): waiting for it to calm down`);
      lastLog = Date.now();
    }
  }
}
