import { existsSync } from "node:fs";
import { join } from "node:path";
import { defineConfig, type Config, type ConfigInput } from "../shared/settings/config.ts";
import { loadMigrations, migrate } from "../shared/db/migrate.ts";
import { closePool, functionSettings, openPool } from "./env.ts";
import { readEnvironment } from "../shared/settings/environment.ts";
import { logger } from "./observability.ts";

/**
 * Applies pending migrations; invoked once per deploy (the component's
 * MigrateOnDeploy). Safe to run twice, and while other functions run their
 * own cold starts. In the Lambda bundle the SQL files are copied to the task
 * root.
 */
export function createMigrateHandler(options: { config?: ConfigInput | Config } = {}): () => Promise<{ applied: number[] }> {
  const settings = functionSettings(defineConfig((options.config ?? {}) as ConfigInput));
  return async () => {
    const { taskRoot } = readEnvironment();
    const bundled = taskRoot && join(taskRoot, "migrations");
    const migrations = bundled && existsSync(bundled) ? await loadMigrations(bundled) : await loadMigrations();
    const pool = openPool(settings, 1);
    try {
      const applied = await migrate(pool, settings.schema, migrations);
      logger.info("migrations applied", { applied, schema: settings.schema });
      return { applied };
    } finally {
      await closePool(pool);
    }
  };
}
