/** Small statistics helpers shared by the driver, the children and the report. */

export const now = () => performance.now();
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Linear-interpolated percentile (type 7, as numpy and the peers' harness). */
export function percentile(values: readonly number[], p: number): number | null {
  const a = [...values].sort((x, y) => x - y);
  if (a.length === 0) return null;
  const h = (a.length - 1) * (p / 100);
  const lo = Math.floor(h);
  const hi = Math.ceil(h);
  return a[lo]! + (a[hi]! - a[lo]!) * (h - lo);
}

export interface Stat {
  median: number;
  min: number;
  max: number;
  n: number;
}

/** Median, min and max of the finite numbers in `values`; null when there are none. */
export function stat(values: readonly unknown[]): Stat | null {
  const v = values.filter((x): x is number => typeof x === "number" && Number.isFinite(x));
  if (v.length === 0) return null;
  return { median: round(percentile(v, 50)!, 3), min: round(Math.min(...v), 3), max: round(Math.max(...v), 3), n: v.length };
}

export interface LedgerSummary {
  handler_calls: number;
  unique: number;
  duplicates: number;
  missing: number;
  out_of_range: number;
  /** The process's CPU (user + system, µs) when the first handler ran: what start-up cost, for the per-job budget. */
  cpu_at_first_hit_us?: number;
}

/** Counts handler runs per job index: the in-process half of the exactly-once check. */
export class RunLedger {
  private readonly runs: Uint16Array;
  private total = 0;
  private outOfRange = 0;
  private cpuAtFirst: number | undefined;
  constructor(readonly n: number) {
    this.runs = new Uint16Array(n);
  }
  hit(i: number): void {
    if (this.total++ === 0) {
      const cpu = process.cpuUsage();
      this.cpuAtFirst = cpu.user + cpu.system;
    }
    if (Number.isInteger(i) && i >= 0 && i < this.n) this.runs[i]!++;
    else this.outOfRange++;
  }
  summary(): LedgerSummary {
    let duplicates = 0;
    let missing = 0;
    for (const r of this.runs) {
      if (r === 0) missing++;
      else if (r > 1) duplicates += r - 1;
    }
    return { handler_calls: this.total, unique: this.n - missing, duplicates, missing, out_of_range: this.outOfRange, cpu_at_first_hit_us: this.cpuAtFirst };
  }
}

export interface HopStats {
  hops: number;
  p50_ms: number | null;
  p95_ms: number | null;
  min_ms: number | null;
  max_ms: number | null;
  /** Hops below zero: a handler seen to start before its enqueue committed (a clock or stamping fault). */
  negative: number;
}

/**
 * hop i = start of job i's handler − the commit of job i's enqueue (from
 * inside job i−1's handler), for i ≥ 1, both stamped in the worker process.
 * A job cannot start before its insert has committed, so a hop is never
 * negative; `negative` counts any that are, rather than hiding them.
 */
export function hopStats(start: readonly (number | null)[], committed: readonly (number | null)[]): HopStats {
  const hops: number[] = [];
  for (let i = 1; i < start.length; i++) {
    const s = start[i];
    const c = committed[i];
    if (s != null && c != null) hops.push(s - c);
  }
  const r = (x: number | null) => (x == null ? null : round(x, 3));
  return {
    hops: hops.length,
    p50_ms: r(percentile(hops, 50)),
    p95_ms: r(percentile(hops, 95)),
    min_ms: hops.length ? r(Math.min(...hops)) : null,
    max_ms: hops.length ? r(Math.max(...hops)) : null,
    negative: hops.filter((h) => h < 0).length,
  };
}
