import { backoffDelayMs } from "../lifecycle/backoff.ts";
import type { Clock } from "./clock.ts";

/**
 * Which database errors are worth another try: the connection went away
 * (reset, terminated backend, restart, a stalled link cut by its timeout) or
 * the server asked for one (serialization failure, deadlock, too many
 * connections). A bad statement or a constraint violation is not transient.
 */

/** SQLSTATE classes and codes a retry can outlive. */
const TRANSIENT_SQLSTATES = new Set([
  "57P01", // admin_shutdown: pg_terminate_backend, a fast shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now: starting up, shutting down
  "53300", // too_many_connections
  "53400", // configuration_limit_exceeded
  "40001", // serialization_failure
  "40P01", // deadlock_detected
  "55P03", // lock_not_available
  "57014", // query_canceled (statement_timeout)
]);

const TRANSIENT_NODE_CODES = new Set([
  "ECONNRESET", "ECONNREFUSED", "ECONNABORTED", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN",
  "LEASEHOLD_WRITE_DEADLINE", // a write that raced a lease gave up on its connection (shared/db/deadline.ts)
]);

const TRANSIENT_MESSAGES = [
  /connection terminated/i,
  /terminating connection/i,
  /query read timeout/i,
  /timeout exceeded when trying to connect/i,
  /connection (?:timeout|closed|ended|reset)/i,
  /client has encountered a connection error/i,
  /cannot use a pool after calling end/i,
  /websocket/i,
  /socket hang up/i,
  /the database system is (?:starting up|shutting down|in recovery mode)/i,
];

export function isTransient(err: unknown): boolean {
  if (!err || typeof err !== "object") return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === "string") {
    if (TRANSIENT_SQLSTATES.has(code) || code.startsWith("08") || TRANSIENT_NODE_CODES.has(code)) return true;
  }
  return typeof message === "string" && TRANSIENT_MESSAGES.some((re) => re.test(message));
}

/** Backoff between tries: the backoff formula (shared/lifecycle/backoff.ts, equal jitter), from `baseMs`, capped. */
export function backoffMs(tryNumber: number, baseMs = 50, capMs = 2_000, random: () => number = Math.random): number {
  return backoffDelayMs(tryNumber, baseMs, capMs, random);
}

export interface RetryOptions {
  clock: Clock;
  /** Give up (rethrow) once the next try could not start before this time. */
  until: () => number;
  /** Told of each transient failure before the wait. */
  onRetry?: (err: unknown, tryNumber: number, waitMs: number) => void;
  random?: () => number;
}

/**
 * Runs `fn` until it succeeds, retrying transient errors with backoff while
 * time remains. A non-transient error, or a transient one with no time left
 * for another try, is thrown.
 */
export async function retrying<T>(fn: () => Promise<T>, o: RetryOptions): Promise<T> {
  for (let tryNumber = 1; ; tryNumber++) {
    try {
      return await fn();
    } catch (err) {
      const waitMs = backoffMs(tryNumber, undefined, undefined, o.random);
      if (!isTransient(err) || o.clock.now() + waitMs >= o.until()) throw err;
      o.onRetry?.(err, tryNumber, waitMs);
      await new Promise<void>((resolve) => o.clock.after(waitMs, resolve));
    }
  }
}
