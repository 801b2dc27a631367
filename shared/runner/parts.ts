import type { Bell } from "./bell.ts";
import type { PrefetchGauge } from "./prefetch.ts";
import { pause, type Clock } from "./clock.ts";
import type { Completer } from "./completer.ts";
import type { Isolation } from "./isolation.ts";
import type { WorkerLog, WorkerOptions } from "./options.ts";
import type { Producer } from "./producer.ts";
import type { Slots } from "./slots.ts";
import type { Tally } from "./tally.ts";

/** What the runner's parts share, wired once by `runWorker` (shared/runner/worker.ts). */
export interface RunnerParts {
  options: WorkerOptions;
  clock: Clock;
  log: WorkerLog;
  producer: Producer;
  completer: Completer;
  slots: Slots;
  tally: Tally;
  isolation: Isolation;
  waiter: Waiter;
  /** Rings when a job is enqueued for a runner waiting for work (`WorkerOptions.bell`). */
  bell: Bell | null;
  gauge: PrefetchGauge;
  /** How long to stay with nothing to do (runner/linger.ts, or the fixed `idleMs`), and where arrivals are told. */
  linger: { ms(): number; arrived(): void };
  pollMs: number;
  /** The longest lease the runner can still take: its time left less its margin, within its `maxLeaseMs`. */
  maxLeaseMs: () => number;
}

/**
 * The loop's one wait between claims, and what cuts it short: a follow-up
 * enqueued for this runner (`request`), or, when the loop waits for a free
 * slot rather than for new work, a slot freed.
 */
export class Waiter {
  /** A follow-up asked for a claim since the last one. */
  requested = false;
  private forSlot = false;
  private wake: (() => void) | null = null;

  request(): void {
    this.requested = true;
    this.wake?.();
  }

  slotFreed(): void {
    if (this.forSlot) this.wake?.();
  }

  async pause(clock: Clock, ms: number, forSlot: boolean): Promise<void> {
    const p = pause(clock, ms);
    this.forSlot = forSlot;
    this.wake = p.wake;
    await p.done;
    this.wake = null;
  }
}
