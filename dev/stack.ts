import { serve, type ServerType } from "@hono/node-server";
import { LambdaClient } from "@aws-sdk/client-lambda";
import { CreateScheduleCommand, SchedulerClient } from "@aws-sdk/client-scheduler";
import { randomBytes } from "node:crypto";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createApp } from "../functions/api/app.ts";
import { createSchedulerWaker } from "../functions/waker.ts";
import { config, functionSpecs, runnerFunctions } from "../shared/config.ts";
import { createPgPool } from "../shared/drivers/pg.ts";
import type { Registry } from "../shared/job.ts";
import { toAwsCron } from "../shared/aws-cron.ts";
import type { RecurringJob } from "../shared/recurring.ts";
import { functionArn } from "./lambda/lambda-env.ts";
import { migrate } from "../shared/migrate.ts";
import { servingRules } from "../shared/serving.ts";
import { startEmbeddedPostgres, type RunningPostgres } from "./embedded-postgres.ts";
import { startLambdaRuntime, type LambdaRuntime } from "./lambda/runtime.ts";
import { startWsRelay } from "./ws-relay.ts";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** Where the embedded Postgres of `npm run dev` listens and keeps its data. */
export const DEV_PG_PORT = Number(process.env.LEASEHOLD_DEV_PG_PORT ?? 54329);
export const DEV_DATA_DIR = process.env.LEASEHOLD_DEV_DATA_DIR ?? join(ROOT, ".dev-data", "pg");

export interface DevStackOptions {
  /** An existing Postgres; default: embedded, data in .dev-data/. */
  databaseUrl?: string;
  /** API port; 0 picks a free one. */
  port?: number;
  /** Fixed API token (for scripts); default: a fresh random one. */
  apiToken?: string;
  /** A module exporting `registry`: the job types to run instead of jobs/index.ts. */
  jobsModule?: string;
  schema?: string;
  /** Every line a function prints. */
  onLog?: (fn: string, line: string) => void;
}

export interface DevStack {
  apiUrl: string;
  dashboardUrl: string;
  lambdaUrl: string;
  databaseUrl: string;
  apiToken: string;
  registry: Registry;
  runtime: LambdaRuntime;
  close(): Promise<void>;
}

/**
 * The whole system on one machine: Postgres, migrations, the local Lambda
 * runtime hosting the runners, scheduler and rescuer with the same timeouts,
 * memory and schedules as infra (crons ticking), the API with the dashboard.
 * The functions reach Postgres through the real Neon driver and a relay.
 */
export async function startDevStack(options: DevStackOptions = {}): Promise<DevStack> {
  const closers: (() => Promise<unknown>)[] = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  try {
    let postgres: RunningPostgres | null = null;
    if (!options.databaseUrl) {
      postgres = await startEmbeddedPostgres({ dataDir: DEV_DATA_DIR, port: DEV_PG_PORT });
      closers.push(() => postgres!.stop());
    }
    const databaseUrl = options.databaseUrl ?? postgres!.url;
    const schema = options.schema ?? config.schema;
    const pool = createPgPool(databaseUrl, 10);
    closers.push(() => pool.end());
    await migrate(pool, schema);

    const jobsModule = options.jobsModule ? resolve(options.jobsModule) : join(ROOT, "jobs", "index.ts");
    const { registry, recurring = [] } = (await import(pathToFileURL(jobsModule).href)) as { registry: Registry; recurring?: RecurringJob[] };
    if (!registry) throw new Error(`${jobsModule} does not export a registry`);

    const relay = await startWsRelay();
    closers.push(() => relay.close());
    const runtime = await startLambdaRuntime({
      functions: functionSpecs(config).filter((f) => f.name !== "api"),
      rootDir: ROOT,
      schedules: true,
      schedulePrecisionMs: config.wake.precisionMs,
      maxConcurrency: Object.fromEntries(runnerFunctions(config).map((f) => [f.name, f.maxConcurrency])),
      env: {
        DATABASE_URL: databaseUrl,
        LEASEHOLD_SCHEMA: schema,
        LEASEHOLD_WS_PROXY: relay.address,
        LEASEHOLD_JOBS: jobsModule,
        NODE_NO_WARNINGS: "1",
      },
      onLog: options.onLog ? (fn, _id, line) => options.onLog!(fn, line) : () => {},
    });
    closers.push(() => runtime.close());

    const lambda = new LambdaClient({
      endpoint: runtime.url, region: "us-east-1", credentials: { accessKeyId: "local", secretAccessKey: "local" },
    });
    closers.push(async () => lambda.destroy());
    const apiToken = options.apiToken ?? randomBytes(24).toString("base64url");
    const waker = createSchedulerWaker("scheduler", () => {}, lambda);
    // The recurring jobs' schedules, as infra/wake.ts deploys them, on the local EventBridge Scheduler.
    const eventBridge = new SchedulerClient({
      endpoint: runtime.url, region: "us-east-1", credentials: { accessKeyId: "local", secretAccessKey: "local" },
    });
    for (const job of recurring) {
      await eventBridge.send(new CreateScheduleCommand({
        Name: `recurring-${job.name.replace(/[^0-9a-zA-Z-_.]/g, "-")}`.slice(0, 64),
        ScheduleExpression: toAwsCron(job.cron),
        ScheduleExpressionTimezone: job.timeZone,
        FlexibleTimeWindow: { Mode: "OFF" },
        Target: {
          Arn: functionArn("scheduler"),
          RoleArn: "arn:aws:iam::123456789012:role/leasehold-wake",
          Input: JSON.stringify({ source: "leasehold.recurring", name: job.name, scheduledTime: "<aws.scheduler.scheduled-time>" }),
        },
      }));
    }
    eventBridge.destroy();
    const app = createApp({ registry, recurring, token: apiToken, waker, store: { db: pool, schema }, serving: servingRules(config) });
    const server: ServerType = await new Promise((done) => {
      const s = serve({ fetch: app.fetch, port: options.port ?? 8787, hostname: "127.0.0.1" }, () => done(s));
    });
    closers.push(() => new Promise((done) => server.close(done)));
    const { port } = server.address() as { port: number };
    const apiUrl = `http://127.0.0.1:${port}`;
    return {
      apiUrl,
      dashboardUrl: `${apiUrl}/dashboard#token=${encodeURIComponent(apiToken)}`,
      lambdaUrl: runtime.url,
      databaseUrl,
      apiToken,
      registry,
      runtime,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
