/**
 * Migrations run as part of every deploy that brings new migrations (or a new
 * database): the `Migrate` function is invoked once by the deploy itself.
 * Applying migrations is idempotent (advisory lock + applied-ids table, see
 * shared/migrate.ts), so a second run does nothing.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { config, functionSpecs } from "../shared/config.ts";
import { METRICS_NAMESPACE, SERVICE_NAME } from "../shared/metrics-names.ts";
import { databaseUrl } from "./secrets.ts";

const spec = functionSpecs(config).find((f) => f.name === "migrate")!;
export const MIGRATE_HANDLER = spec.handler;

/** Hash of every file in migrations/: a new or edited migration re-runs the invocation. */
function migrationsHash(dir: string): string {
  const hash = createHash("sha256");
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".sql")).sort()) {
    hash.update(file).update("\0").update(readFileSync(join(dir, file))).update("\0");
  }
  return hash.digest("hex");
}

export const migrateFunction = new sst.aws.Function("Migrate", {
  handler: MIGRATE_HANDLER,
  runtime: "nodejs22.x",
  timeout: `${spec.timeoutSeconds} seconds`,
  memory: `${spec.memoryMb} MB`,
  link: [databaseUrl],
  environment: { POWERTOOLS_SERVICE_NAME: SERVICE_NAME, POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE },
  // shared/migrate.ts reads ../migrations/ relative to the bundled handler.
  copyFiles: [{ from: "migrations", to: "migrations" }],
  retries: 0,
});

export const migration = new aws.lambda.Invocation("MigrateOnDeploy", {
  functionName: migrateFunction.name,
  input: JSON.stringify({}),
  triggers: {
    migrations: migrationsHash(join($cli.paths.root, "migrations")),
    schema: config.schema,
    // A new database (a changed URL) gets migrated too; only a hash is stored.
    database: databaseUrl.value.apply((url) => createHash("sha256").update(url).digest("hex")),
  },
});
