import pg from "pg";
import type { Store } from "../shared/db/db.ts";
import { createPgPool } from "../shared/db/drivers/pg.ts";
import { migrate } from "../shared/db/migrate.ts";
import { now, sleep } from "./stats.ts";

/** Database plumbing for the driver: fresh databases, CHECKPOINT, server facts. */

export const DEFAULT_DSN = "postgres://postgres@127.0.0.1:5432/postgres";

/** Where a library's connections go: straight to the server, or through the latency relay. */
export interface Route {
  host: string;
  port: number;
}

/** DSN for database `name` on the admin DSN's server, optionally via another host:port. */
export function dsnFor(adminDsn: string, name: string, via?: Route): string {
  const u = new URL(adminDsn);
  u.pathname = `/${name}`;
  if (via) {
    u.hostname = via.host;
    u.port = String(via.port);
  }
  return u.toString();
}

export async function withClient<T>(dsn: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: dsn });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

const ident = (s: string) => `"${s.replace(/"/g, '""')}"`;

/** Drops (if present) and creates an empty database. */
export async function freshDb(adminDsn: string, name: string): Promise<void> {
  await withClient(adminDsn, async (c) => {
    await c.query(`drop database if exists ${ident(name)} with (force)`);
    await c.query(`create database ${ident(name)}`);
  });
}

export async function dropDb(adminDsn: string, name: string): Promise<void> {
  await withClient(adminDsn, (c) => c.query(`drop database if exists ${ident(name)} with (force)`));
}

/** Flushes dirty buffers so a checkpoint owed to earlier work does not land inside a timing. */
export async function checkpoint(adminDsn: string): Promise<void> {
  await withClient(adminDsn, (c) => c.query("checkpoint"));
}

export interface ServerInfo {
  version: string;
  synchronous_commit: string;
  fsync: string;
  shared_buffers: string;
  max_connections: string;
}

export async function serverInfo(adminDsn: string): Promise<ServerInfo> {
  return withClient(adminDsn, async (c) => {
    const { rows } = await c.query(`select version() as version,
      current_setting('synchronous_commit') as synchronous_commit, current_setting('fsync') as fsync,
      current_setting('shared_buffers') as shared_buffers, current_setting('max_connections') as max_connections`);
    return rows[0] as ServerInfo;
  });
}

/** Polls `fn` until it returns true, or throws after `timeoutMs`. */
export async function waitFor(fn: () => Promise<boolean>, what: string, timeoutMs = 120_000, everyMs = 2): Promise<void> {
  const t0 = now();
  while (!(await fn())) {
    if (now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * Runs `fn` on a fresh database `name` with Leasehold migrated into it (pool
 * of `poolSize`), then drops it: the setup of the Leasehold-only phases.
 */
export async function withLeaseholdDb<T>(adminDsn: string, name: string, poolSize: number, fn: (store: Store) => Promise<T>): Promise<T> {
  await freshDb(adminDsn, name);
  const pool = createPgPool(dsnFor(adminDsn, name), poolSize);
  try {
    await migrate(pool, "leasehold");
    return await fn({ db: pool, schema: "leasehold" });
  } finally {
    await pool.end();
    await dropDb(adminDsn, name);
  }
}
