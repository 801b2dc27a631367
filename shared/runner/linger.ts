import { systemClock, type Clock } from "./clock.ts";

/**
 * How long an idle runner stays, claiming every poll, before it exits. A
 * runner bills its memory for every millisecond it lingers; exiting costs a
 * wake-up later (a scheduler invocation, a runner invocation, maybe a cold
 * start) if work arrives after all. So it lingers only as long as the work
 * it has seen makes another arrival likely:
 *
 * - an arrival is work found after the runner had nothing to do (its first
 *   claim, or a claim after an idle spell), noted at `clock.now()`;
 * - with fewer than two arrivals (an isolated job, or one burst) it stays
 *   `isolatedMs` (default `minMs`, one poll; the deployed runners: 0, so
 *   the claim that finds the queue empty is the last) and exits;
 * - with a stream, it expects the next arrival within the longest of the
 *   last `window` gaps between arrivals, and stays `slack` times that;
 * - a stream too sparse for that to fit within `maxMs` (the configured idle
 *   time) gets `minMs` too: lingering `maxMs` and leaving just before the
 *   next arrival would pay for the linger and the wake-up both.
 */
export interface LingerOptions {
  /** The shortest stay: one poll. */
  minMs: number;
  /** The stay after fewer than two arrivals; default `minMs`. */
  isolatedMs?: number;
  /** The longest stay (the runner's `idleMs`). */
  maxMs: number;
  /** Gaps between arrivals looked at. */
  window?: number;
  /** The expected gap is stretched by this much, for jitter. */
  slack?: number;
}

export class Linger {
  private readonly arrivals: number[] = [];
  private readonly window: number;
  private readonly slack: number;

  constructor(private readonly clock: Clock, private readonly o: LingerOptions) {
    this.window = o.window ?? 4;
    this.slack = o.slack ?? 1.5;
  }

  /** Work arrived after the runner had nothing to do (or it is its first). */
  arrived(): void {
    this.arrivals.push(this.clock.now());
    if (this.arrivals.length > this.window + 1) this.arrivals.shift();
  }

  /** How long to stay idle, counted from the end of the last work. */
  ms(): number {
    const { minMs, maxMs } = this.o;
    if (this.arrivals.length < 2) return Math.min(this.o.isolatedMs ?? minMs, maxMs);
    let longest = 0;
    for (let i = 1; i < this.arrivals.length; i++) longest = Math.max(longest, this.arrivals[i]! - this.arrivals[i - 1]!);
    const stay = Math.ceil(longest * this.slack);
    if (stay > maxMs) return Math.min(minMs, maxMs);
    return Math.max(minMs, stay);
  }
}

const environment = new Map<string, Linger>();

/**
 * The linger of runner `name` in this execution environment (a Lambda
 * environment, a Worker isolate), kept across its invocations: a warm runner
 * woken once per job of a stream learns the stream's pace from the jobs its
 * earlier invocations saw and stays for the next; a job after a long quiet
 * leaves as soon as a claim finds nothing more (an isolated job so costs its
 * runner a claim, the job and a settle: no linger).
 */
export function environmentLinger(name: string, pollMs: number, idleMs: number): Linger {
  let linger = environment.get(name);
  if (!linger) environment.set(name, (linger = new Linger(systemClock, { minMs: pollMs, maxMs: idleMs, isolatedMs: 0 })));
  return linger;
}
