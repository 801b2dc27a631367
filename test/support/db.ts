import { randomBytes } from "node:crypto";
import WebSocket from "ws";
import { inject } from "vitest";
import type { Pool, Store } from "../../shared/db/db.ts";
import { createPgPool } from "../../shared/db/drivers/pg.ts";
import { createNeonPool } from "../../shared/db/drivers/neon.ts";
import { migrate } from "../../shared/db/migrate.ts";

export type Driver = "pg" | "neon";
/** The core suite runs through both database drivers. */
export const drivers: Driver[] = ["pg", "neon"];

/**
 * Ends the leases of the running jobs on `queue` now, as if they had run
 * out, by moving their stored expiry into the past: a test of what follows
 * a lost lease need not wait one out (leases are at least MIN_LEASE_MS).
 */
export async function expireLeases(t: { admin: Pool; schema: string }, queue: string, id?: string): Promise<void> {
  await t.admin.query(
    `update "${t.schema}".jobs set lease_expires_at = now() - interval '1 millisecond'
     where queue = $1 and status = 'running' and ($2::bigint is null or id = $2::bigint)`,
    [queue, id ?? null],
  );
}

export function databaseUrl(): string {
  return inject("databaseUrl");
}

export function createPool(driver: Driver, max = 10, url = databaseUrl()): Pool {
  return driver === "pg"
    ? createPgPool(url, max)
    : createNeonPool(url, { max, wsProxy: inject("wsRelay"), webSocketConstructor: WebSocket });
}

export interface TestDb extends Store {
  pool: Pool;
  /** A plain pg pool on the same schema, for assertions. */
  admin: Pool;
  drop(): Promise<void>;
}

/** A freshly migrated schema of its own, reached through `driver`. */
export async function createTestDb(driver: Driver, poolSize = 10, url = databaseUrl()): Promise<TestDb> {
  const schema = `t_${randomBytes(6).toString("hex")}`;
  const admin = createPgPool(url, 4);
  await migrate(admin, schema);
  const pool = createPool(driver, poolSize, url);
  return {
    db: pool,
    schema,
    pool,
    admin,
    async drop() {
      await pool.end();
      await admin.query(`drop schema "${schema}" cascade`);
      await admin.end();
    },
  };
}

/**
 * A database of its own (for what Postgres counts per database, such as
 * `pg_stat_database.xact_commit`): its URL, and a function that drops it.
 */
export async function createOwnDatabase(): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const name = `leasehold_t_${randomBytes(5).toString("hex")}`;
  const server = createPgPool(databaseUrl(), 1);
  await server.query(`create database ${name}`);
  const url = new URL(databaseUrl());
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      await server.query(`drop database if exists ${name} with (force)`);
      await server.end();
    },
  };
}
