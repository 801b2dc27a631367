/**
 * Wakes the scheduler right after an enqueue commits, so a job in an idle
 * queue starts in well under a second instead of at the next cron tick.
 * LISTEN/NOTIFY is not available to Lambdas; this is the replacement.
 *
 * Coalesced: however many enqueues call `wake()`, at most one wake-up is in
 * flight, and at most one more is sent after it, no sooner than
 * `minIntervalMs` after the previous one. A failed wake-up is reported and
 * dropped: the cron tick still finds the job.
 */
import { systemClock, type Clock } from "../runner/clock.ts";

/** The event a wake-up sends the scheduler. */
export const WAKE_EVENT = { source: "leasehold.wake" } as const;

export interface Waker {
  wake(): void;
  /** Resolves when no wake-up is pending or in flight. */
  settled(): Promise<void>;
}

export function createWaker(
  send: () => Promise<void>,
  options: { minIntervalMs?: number; onError?: (err: unknown) => void; clock?: Clock } = {},
): Waker {
  const minIntervalMs = options.minIntervalMs ?? 250;
  const clock = options.clock ?? systemClock;
  let inflight: Promise<void> | null = null;
  let again = false;
  let lastSentAt = Number.NEGATIVE_INFINITY;

  const fire = (): Promise<void> => {
    const wait = Math.max(0, lastSentAt + minIntervalMs - clock.now());
    return new Promise<void>((resolve) => clock.after(wait, resolve))
      .then(() => {
        lastSentAt = clock.now();
        return send();
      })
      .catch((err) => options.onError?.(err))
      .finally(() => {
        if (again) {
          again = false;
          inflight = fire();
        } else {
          inflight = null;
        }
      });
  };

  return {
    wake() {
      if (inflight) again = true;
      else inflight = fire();
    },
    async settled() {
      while (inflight) await inflight;
    },
  };
}
