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
 *
 * A lent connection is the other case. pg-pool takes its own listener off a
 * connection as it lends it, in the same turn as the release (or the connect)
 * that freed it, while a caller of the promise `connect()` can add its own
 * only a microtask later; the driver parses a whole socket read at once, so a
 * loss read with the message that freed the connection (on a loaded host, a
 * restart's answer and its "terminating connection" together) was emitted in
 * between, unheard, and ended the process. So every connection keeps a
 * listener of its own for life. Whoever holds it still learns of the loss:
 * its next query fails (the connection is no longer queryable), and the pool
 * drops it when it comes back.
 */
export function survivingIdleErrors<P extends { on(event: "error", listener: (err: Error) => void): unknown }>(
  pool: P,
  onError: (err: Error) => void = () => {},
): P {
  pool.on("error", onError);
  (pool as unknown as { on(event: "connect", listener: (client: ErrorEmitter) => void): unknown }).on("connect", (client) =>
    client.on("error", heardElsewhere),
  );
  return pool;
}

interface ErrorEmitter {
  on(event: "error", listener: (err: Error) => void): unknown;
}

/** A lent connection's loss: its holder hears of it from its next query. */
const heardElsewhere = () => {};
