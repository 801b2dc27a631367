import { MAX_BACKOFF_MS } from "./config.ts";

/**
 * Delay before the retry that follows attempt `attempt` (1-based): exponential
 * from `baseMs`, capped at `capMs` (a job's: `MAX_BACKOFF_MS`), with "equal
 * jitter" (half fixed, half random) so a burst of failures does not come
 * back as a burst.
 */
export function retryDelayMs(attempt: number, baseMs: number, random: () => number = Math.random, capMs = MAX_BACKOFF_MS): number {
  const exponential = Math.min(capMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(exponential / 2 + (exponential / 2) * random());
}
