/**
 * Migrations run as part of every deploy that brings new migrations (or a new
 * database): the `Migrate` function is invoked once by the deploy itself.
 * Applying migrations is idempotent (advisory lock + applied-ids table, see
 * shared/db/migrate.ts), so a second run does nothing.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { functionSpecs } from "../shared/settings/function-specs.ts";
import { writeEnvironment } from "../shared/settings/environment.ts";
import { METRICS_NAMESPACE, SERVICE_NAME } from "../shared/observe/metrics-names.ts";
import type { InfraContext } from "./context.ts";

/** Hash of every file in the migrations directory: a new or edited migration re-runs the invocation. */
function migrationsHash(dir: string): string {
  const hash = createHash("sha256");
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".sql")).sort()) {
    hash.update(file).update("\0").update(readFileSync(join(dir, file))).update("\0");
  }
  return hash.digest("hex");
}

export function createMigration(ctx: InfraContext): { migrateFunction: sst.aws.Function; migration: aws.lambda.Invocation } {
  const spec = functionSpecs(ctx.config).find((f) => f.name === "migrate")!;
  const migrateFunction = new sst.aws.Function(ctx.child("Migrate"), {
    handler: ctx.handlers.migrate,
    runtime: "nodejs22.x",
    timeout: `${spec.timeoutSeconds} seconds`,
    memory: `${spec.memoryMb} MB`,
    link: [ctx.databaseUrl],
    environment: { POWERTOOLS_SERVICE_NAME: SERVICE_NAME, POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE, ...writeEnvironment({ schema: ctx.config.schema }) },
    // The migrate handler reads migrations/ in its task root.
    copyFiles: [{ from: relative($cli.paths.root, ctx.migrationsDir) || ".", to: "migrations" }],
    retries: 0,
  });

  const migration = new aws.lambda.Invocation(ctx.child("MigrateOnDeploy"), {
    functionName: migrateFunction.name,
    input: JSON.stringify({}),
    triggers: {
      migrations: migrationsHash(ctx.migrationsDir),
      schema: ctx.config.schema,
      // A new database (a changed URL) gets migrated too; only a hash is stored.
      database: ctx.databaseUrl.value.apply((url: string) => createHash("sha256").update(url).digest("hex")),
    },
  });
  return { migrateFunction, migration };
}
