import pg from "pg";
import { namesStatements, type Pool } from "../db.ts";
import { poolTimeouts, survivingIdleErrors, type ConnectionTimeouts } from "./options.ts";

export interface PgOptions extends Partial<ConnectionTimeouts> {
  max?: number;
  /** Told of each idle connection that died; the pool replaces it. */
  onIdleError?: (err: Error) => void;
}

/**
 * node-postgres over TCP: local development, tests, long-lived workers. TCP
 * keepalive finds a dead peer; every query has a timeout.
 */
export function createPgPool(connectionString: string, options: PgOptions | number = {}): Pool {
  const o = typeof options === "number" ? { max: options } : options;
  const pool = new pg.Pool({
    connectionString,
    max: o.max ?? 10,
    keepAlive: true,
    keepAliveInitialDelayMillis: 5_000,
    ...poolTimeouts(o),
  });
  return namesStatements(survivingIdleErrors(pool, o.onIdleError)) as unknown as Pool;
}
