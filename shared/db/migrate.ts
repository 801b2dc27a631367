import { readdir, readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { schemaIdent, sql, transaction, type Pool } from "./db.ts";

export const MIGRATIONS_DIR = fileURLToPath(new URL("../../migrations/", import.meta.url));

/** One lock id for every migrator of every schema: migrations are rare. */
const MIGRATION_LOCK = 0x1ea5e401;

export interface Migration {
  id: number;
  name: string;
  text: string;
}

export async function loadMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f)).sort();
  return Promise.all(
    files.map(async (file) => ({
      id: Number(file.slice(0, 4)),
      name: file.slice(5, -4),
      text: await readFile(join(dir, file), "utf8"),
    })),
  );
}

/**
 * Applies the migrations not yet applied, in order, each in its own
 * transaction, and returns the ids it applied. Safe when several cold starts
 * run it at once: each transaction first takes an advisory lock and re-reads
 * what is applied, so the losers of the race find the work done.
 */
export async function migrate(pool: Pool, schema = "leasehold", migrations?: Migration[]): Promise<number[]> {
  const all = migrations ?? (await loadMigrations());
  const applied: number[] = [];
  for (const migration of all) {
    const ran = await transaction(pool, async (tx) => {
      await tx.query("select pg_advisory_xact_lock($1::bigint)", [MIGRATION_LOCK]);
      await tx.query(`create schema if not exists ${schemaIdent(schema)}`);
      await tx.query(
        sql(schema, `create table if not exists leasehold.migrations (
          id integer primary key,
          name text not null,
          applied_at timestamptz not null default now())`),
      );
      const { rows } = await tx.query(sql(schema, "select 1 from leasehold.migrations where id = $1::integer"), [
        migration.id,
      ]);
      if (rows.length > 0) return false;
      await tx.query(sql(schema, migration.text));
      await tx.query(sql(schema, "insert into leasehold.migrations (id, name) values ($1::integer, $2::text)"), [
        migration.id,
        migration.name,
      ]);
      return true;
    });
    if (ran) applied.push(migration.id);
  }
  return applied;
}
