import { namesAs, send, type NamedStatement, type Queryable, type QueryResult, type Store } from "./db.ts";

/**
 * A write that races a lease (a settle, a lease renewal) must not wait out
 * the driver's query timeout on a connection gone silent: by then the lease
 * it races is gone. `boundedStore` runs each query of such a write on a
 * connection of its own, under a deadline on the caller's clock; past it the
 * connection is abandoned (destroyed, never returned to the pool) and the
 * query fails with `WriteDeadlineError`, so the caller's retry takes another
 * connection. The caller picks the deadline (`writeDeadlineMs`).
 */

/**
 * The least a write is given on one connection: a settle round trip with a
 * fresh connection's handshake and Postgres's backend start, on a loaded
 * host. At 100 ms, every try after a cut could run out while connecting,
 * and the leases with them (docs/internals.md, "The per-write deadline").
 */
export const WRITE_DEADLINE_FLOOR_MS = 300;

/**
 * How long one try of a write may take on one connection: a third of the
 * time the earliest lease it races has left (so a stalled try leaves room
 * for two more), at least `WRITE_DEADLINE_FLOOR_MS`, at most `capMs` (the
 * driver's query timeout).
 */
export function writeDeadlineMs(leaseLeftMs: number, capMs: number): number {
  return Math.min(capMs, Math.max(WRITE_DEADLINE_FLOOR_MS, Math.floor(leaseLeftMs / 3)));
}

/** A query that did not answer within its write deadline; its connection was destroyed. */
export class WriteDeadlineError extends Error {
  readonly code = "LEASEHOLD_WRITE_DEADLINE";
  constructor(readonly ms: number) {
    super(`no answer within the write deadline of ${ms}ms; connection abandoned`);
    this.name = "WriteDeadlineError";
  }
}

interface Timer {
  after(ms: number, fn: () => void): () => void;
}

interface PooledClient extends Queryable {
  release(err?: Error | boolean): void;
  on?(event: "error", listener: (err: Error) => void): unknown;
  removeListener?(event: "error", listener: (err: Error) => void): unknown;
  connection?: { stream?: { destroy?: () => void } };
}

/** A pg (or Neon) pool: one that lends connections. A single client has no pool to take another from. */
function lends(db: Queryable): db is Queryable & { connect(): Promise<PooledClient> } {
  return typeof (db as { connect?: unknown }).connect === "function" && typeof (db as { totalCount?: unknown }).totalCount === "number";
}

/** Ends a client now: out of the pool, its socket closed rather than waiting on a peer gone silent. */
function destroy(client: PooledClient, err: Error): void {
  client.release(err);
  client.connection?.stream?.destroy?.();
}

/** One query under a deadline of `ms` on `timer`, on a connection taken for it alone (from a pool). `text` may be a statement by name. */
export function queryWithin<R>(db: Queryable, ms: number, timer: Timer, text: string | NamedStatement, values?: unknown[]): Promise<QueryResult<R>> {
  return new Promise<QueryResult<R>>((resolve, reject) => {
    let over = false;
    let client: PooledClient | undefined;
    const cancel = timer.after(ms, () => {
      over = true;
      const err = new WriteDeadlineError(ms);
      if (client) destroy(client, err);
      reject(err);
    });
    const settle = (ok: boolean, value: unknown) => {
      if (over) return;
      cancel();
      if (ok) resolve(value as QueryResult<R>);
      else reject(value);
    };
    if (!lends(db)) {
      send<R>(db, text, values).then((r) => settle(true, r), (e) => settle(false, e));
      return;
    }
    db.connect().then(
      (c) => {
        // Connected after the deadline: a sound connection, back to the pool unused.
        if (over) return c.release();
        client = c;
        // As the pool's own query does: an error on the checked-out connection ends this query, never the process.
        // The listener stays on a connection that is destroyed (it may still report its end), and only there.
        let released = false;
        const onError = (e: Error) => done(false, e);
        const done = (ok: boolean, value: unknown) => {
          if (released) return;
          released = true;
          if (ok && !over) c.removeListener?.("error", onError);
          if (!over) c.release(ok ? undefined : (value as Error));
          settle(ok, value);
        };
        c.on?.("error", onError);
        send<R>(c, text, values).then((r) => done(true, r), (e: Error) => done(false, e));
      },
      (e) => settle(false, e),
    );
  });
}

/** `store` whose every query runs under `ms` on `timer` (see `queryWithin`); by name when `store`'s pool sends so. */
export function boundedStore(store: Store, ms: number, timer: Timer): Store {
  const db = { query: (text: string | NamedStatement, values?: unknown[]) => queryWithin(store.db, ms, timer, text, values) };
  return { schema: store.schema, db: namesAs(db as Queryable, store.db) };
}
