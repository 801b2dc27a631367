import { MAX_BACKOFF_MS } from "../settings/config.ts";

/**
 * The backoff formula, the one every retry uses (a job's retry after a
 * failure or a death, an Invoke the scheduler retries, a database call the
 * runner retries): the delay before the retry that follows try `n`
 * (1-based), exponential from `baseMs`, capped at `capMs`, with "equal
 * jitter" (half fixed, half random) so a burst of failures does not come
 * back as a burst, and no retry comes back at once.
 */
export function backoffDelayMs(n: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  const exponential = Math.min(capMs, baseMs * 2 ** Math.max(0, n - 1));
  return Math.round(exponential / 2 + (exponential / 2) * random());
}

/** A job's retry delay after its attempt `attempt`: the backoff formula, capped at `MAX_BACKOFF_MS` unless told. */
export function retryDelayMs(attempt: number, baseMs: number, random: () => number = Math.random, capMs = MAX_BACKOFF_MS): number {
  return backoffDelayMs(attempt, baseMs, capMs, random);
}
