import { existsSync } from "node:fs";
import { join } from "node:path";
import { loadMigrations, migrate } from "../shared/migrate.ts";
import { closePool, openPool, schema } from "./env.ts";
import { logger } from "./observability.ts";

/**
 * Applies pending migrations; invoked once per deploy (infra/migrate.ts).
 * Safe to run twice, and while other functions run their own cold starts.
 * In the Lambda bundle the SQL files are copied to the task root.
 */
export async function handler(): Promise<{ applied: number[] }> {
  const bundled = process.env.LAMBDA_TASK_ROOT && join(process.env.LAMBDA_TASK_ROOT, "migrations");
  const migrations = bundled && existsSync(bundled) ? await loadMigrations(bundled) : await loadMigrations();
  const pool = openPool(1);
  try {
    const applied = await migrate(pool, schema(), migrations);
    logger.info("migrations applied", { applied });
    return { applied };
  } finally {
    await closePool(pool);
  }
}
