/**
 * Time as the runner sees it. Deadlines, retries and waits all go through a
 * `Clock`, so tests drive them without sleeping (River's `baseservice.Time`).
 */
export interface Clock {
  /** Milliseconds, monotonic enough for deadlines (epoch-based in production). */
  now(): number;
  /** Calls `fn` after `ms`; returns a function that cancels it. */
  after(ms: number, fn: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, Math.max(0, ms));
    return () => clearTimeout(timer);
  },
};

/** Resolves after `ms` on `clock`, or at once when `wake` is called first. */
export function pause(clock: Clock, ms: number): { done: Promise<void>; wake: () => void } {
  let wake!: () => void;
  const done = new Promise<void>((resolve) => {
    const cancel = clock.after(ms, resolve);
    wake = () => {
      cancel();
      resolve();
    };
  });
  return { done, wake };
}

/**
 * Resolves on the next turn of the event loop, after the I/O callbacks and
 * microtasks already queued: `setImmediate` where there is one (Node), else
 * `setTimeout(0)` (Workers, browsers). Not a clock wait: test clocks do not
 * drive it.
 */
export function nextTurn(): Promise<void> {
  const immediate = (globalThis as { setImmediate?: (fn: () => void) => unknown }).setImmediate;
  return new Promise<void>((resolve) => (immediate ? immediate(resolve) : setTimeout(resolve, 0)));
}
