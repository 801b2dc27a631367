import { DEFAULT_SCHEMA } from "../settings/config.ts";
import { createPgPool } from "./drivers/pg.ts";
import { migrate } from "./migrate.ts";
import { readEnvironment } from "../settings/environment.ts";

/** `npm run migrate`: applies pending migrations to DATABASE_URL. */
const env = readEnvironment();
const url = env.databaseUrl;
if (!url) {
  console.error("DATABASE_URL is not set: point it at the Postgres to migrate.");
  process.exit(2);
}
const pool = createPgPool(url, 1);
try {
  const schema = env.schema ?? DEFAULT_SCHEMA;
  const applied = await migrate(pool, schema);
  console.log(applied.length ? `applied migrations ${applied.join(", ")} to schema ${schema}` : `schema ${schema} is up to date`);
} catch (err) {
  console.error(`migration failed: ${(err as Error).message}`);
  process.exitCode = 1;
} finally {
  await pool.end();
}
