/**
 * Timeouts every Leasehold connection carries, so that no query can hang on a
 * silently stalled network (invariant 12). Each is a ceiling on a healthy
 * round trip to Neon, not on a job: handlers run outside any query.
 */
export interface ConnectionTimeouts {
  /** A query with no answer after this long fails (client side) and its connection is dropped. */
  queryTimeoutMs: number;
  /** Opening a connection (TCP/WebSocket, TLS, auth) fails after this long. */
  connectTimeoutMs: number;
}

export const DEFAULT_QUERY_TIMEOUT_MS = 5_000;
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

export function connectionTimeouts(given: Partial<ConnectionTimeouts> = {}): ConnectionTimeouts {
  return {
    queryTimeoutMs: given.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS,
    connectTimeoutMs: given.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
  };
}

/** pg-style pool settings shared by both drivers (Neon's Pool is pg's Pool). */
export function poolTimeouts(given: Partial<ConnectionTimeouts>) {
  const t = connectionTimeouts(given);
  return { query_timeout: t.queryTimeoutMs, connectionTimeoutMillis: t.connectTimeoutMs };
}

/**
 * A pool emits `error` when an idle connection dies (a restart, a reset, a
 * terminated backend). Unheard, that event kills the process; heard, the pool
 * just drops the connection and opens another on the next query.
 */
export function survivingIdleErrors<P extends { on(event: "error", listener: (err: Error) => void): unknown }>(
  pool: P,
  onError: (err: Error) => void = () => {},
): P {
  pool.on("error", onError);
  return pool;
}
