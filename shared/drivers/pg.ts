import pg from "pg";
import type { Pool } from "../db.ts";

/** node-postgres over TCP: local development, tests, long-lived workers. */
export function createPgPool(connectionString: string, max = 10): Pool {
  return new pg.Pool({ connectionString, max }) as unknown as Pool;
}
