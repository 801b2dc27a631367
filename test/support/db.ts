import { randomBytes } from "node:crypto";
import WebSocket from "ws";
import { inject } from "vitest";
import type { Pool, Store } from "../../shared/db.ts";
import { createPgPool } from "../../shared/drivers/pg.ts";
import { createNeonPool } from "../../shared/drivers/neon.ts";
import { migrate } from "../../shared/migrate.ts";

export type Driver = "pg" | "neon";
/** The core suite runs through both database drivers. */
export const drivers: Driver[] = ["pg", "neon"];

export function databaseUrl(): string {
  return inject("databaseUrl");
}

export function createPool(driver: Driver, max = 10): Pool {
  return driver === "pg"
    ? createPgPool(databaseUrl(), max)
    : createNeonPool(databaseUrl(), { max, wsProxy: inject("wsRelay"), webSocketConstructor: WebSocket });
}

export interface TestDb extends Store {
  pool: Pool;
  /** A plain pg pool on the same schema, for assertions. */
  admin: Pool;
  drop(): Promise<void>;
}

/** A freshly migrated schema of its own, reached through `driver`. */
export async function createTestDb(driver: Driver, poolSize = 10): Promise<TestDb> {
  const schema = `t_${randomBytes(6).toString("hex")}`;
  const admin = createPgPool(databaseUrl(), 4);
  await migrate(admin, schema);
  const pool = createPool(driver, poolSize);
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
