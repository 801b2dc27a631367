import { serve, type ServerType } from "@hono/node-server";
import { LambdaClient } from "@aws-sdk/client-lambda";
import { CreateScheduleCommand, SchedulerClient } from "@aws-sdk/client-scheduler";
import { randomBytes } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createApp } from "../functions/api/app.ts";
import { createSchedulerWaker } from "../functions/waker.ts";
import { type Config } from "../shared/settings/config.ts";
import { runnerFunctions } from "../shared/settings/function-specs.ts";
import { loadAppConfig } from "./app-config.ts";
import { localFunctions } from "./functions.ts";
import { createPgPool } from "../shared/db/drivers/pg.ts";
import type { Registry } from "../shared/jobs/job.ts";
import type { Store } from "../shared/db/db.ts";
import type { Waker } from "../shared/scheduler/wake.ts";
import { toAwsCron } from "../shared/scheduler/aws-cron.ts";
import type { RecurringJob } from "../shared/jobs/recurring.ts";
import { functionArn } from "./lambda/lambda-env.ts";
import { migrate } from "../shared/db/migrate.ts";
import { servingRules } from "../shared/settings/serving.ts";
import { portTaken, startEmbeddedPostgres, type RunningPostgres } from "./embedded-postgres.ts";
import { DEV_AWS, DEV_DATA_DIR, DEV_STATE_FILE, devStackEnv, type DevStackState } from "./state.ts";
import { LOCAL_ENV } from "./local-env.ts";
import { queueStats } from "../shared/observe/stats.ts";
import { startLambdaRuntime, type LambdaRuntime } from "./lambda/runtime.ts";
import { startWsRelay } from "./ws-relay.ts";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
/**
 * Where the embedded Postgres of `npm run dev` would rather listen (taken, by
 * another checkout's stack say, a free port is used instead). Its data is in
 * DEV_DATA_DIR, in this checkout.
 */
export const DEV_PG_PORT = Number(process.env.LEASEHOLD_DEV_PG_PORT || 54329);
export { DEV_DATA_DIR, DEV_STATE_FILE, readDevStackState, type DevStackState } from "./state.ts";
/** The API's port when none is given. */
export const DEV_API_PORT = 8787;

/** The dev stack cannot start for a reason the user can fix; the message is one line. */
export class DevStackError extends Error {
  override name = "DevStackError";
}

/** The API's port is taken. */
export class PortInUseError extends DevStackError {
  constructor(readonly port: number, hint = `PORT=${port + 1} npm run dev`) {
    super(`port ${port} is already in use (another dev stack?): choose another API port, e.g. ${hint}`);
  }
}

export interface DevStackOptions {
  /** An existing Postgres; default: embedded, data in .dev-data/. */
  databaseUrl?: string;
  /** API port (default 8787); 0 picks a free one. A taken port fails with a PortInUseError, before anything starts. */
  port?: number;
  /** Fixed API token (for scripts); default: a fresh random one. */
  apiToken?: string;
  /** The app's root: where its `leasehold.config.ts` is, and what paths are relative to. Default: this repository. */
  root?: string;
  /** Default: the app's `leasehold.config.ts` (every default without one). */
  config?: Config;
  /** A module exporting `registry`: the job types to run instead of the config's `jobs`. */
  jobsModule?: string;
  schema?: string;
  /** Every line a function prints. */
  onLog?: (fn: string, line: string) => void;
  /** How to ask for another API port, in the PortInUseError message (default: `PORT=<port> npm run dev`). */
  portHint?: (port: number) => string;
}

export interface DevStack {
  apiUrl: string;
  dashboardUrl: string;
  lambdaUrl: string;
  databaseUrl: string;
  schema: string;
  /** The WebSocket relay ("host:port") in front of the database, for the Neon driver. */
  wsProxy: string;
  /** Where the stack's state is published (DEV_STATE_FILE), or null when it is not (an external DATABASE_URL). */
  stateFile: string | null;
  apiToken: string;
  registry: Registry;
  runtime: LambdaRuntime;
  close(): Promise<void>;
}

/** The scheduler's name on the local Lambda runtime (functionSpecs names it so). */
const SCHEDULER = "scheduler";

/**
 * Jobs left queued or running by an earlier run (or written while no stack
 * ran) wait for a wake-up that nothing else sends now: the stack sends it at
 * start, as an enqueue would. Nothing pending, nothing is woken.
 */
async function wakeIfPending(store: Store, waker: Waker): Promise<void> {
  const pending = (await queueStats(store)).some((q) => q.ready + q.delayed + q.running > 0);
  if (!pending) return;
  waker.wake();
  await waker.settled();
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
  const apiPort = options.port ?? DEV_API_PORT;
  if (apiPort !== 0 && (await portTaken(apiPort))) throw new PortInUseError(apiPort, options.portHint?.(apiPort + 1));
  try {
    let postgres: RunningPostgres | null = null;
    if (!options.databaseUrl) {
      postgres = await startEmbeddedPostgres({ dataDir: DEV_DATA_DIR, port: DEV_PG_PORT, anyPort: true });
      closers.push(() => postgres!.stop());
    }
    const databaseUrl = options.databaseUrl ?? postgres!.url;
    const root = options.root ?? ROOT;
    const config = options.config ?? (await loadAppConfig(root));
    const schema = options.schema ?? config.schema;
    const pool = createPgPool(databaseUrl, 10);
    closers.push(() => pool.end());
    await migrate(pool, schema);

    const jobsModule = resolve(root, options.jobsModule ?? config.jobs);
    const { registry, recurring = [] } = (await import(pathToFileURL(jobsModule).href)) as { registry: Registry; recurring?: RecurringJob[] };
    if (!registry) throw new Error(`${jobsModule} does not export a registry`);

    const relay = await startWsRelay();
    closers.push(() => relay.close());
    const runtime = await startLambdaRuntime({
      functions: localFunctions({ root, config, jobsModule }).filter((f) => f.name !== "api"),
      rootDir: root,
      schedules: true,
      schedulePrecisionMs: config.wake.precisionMs,
      maxConcurrency: Object.fromEntries(runnerFunctions(config).map((f) => [f.name, f.maxConcurrency])),
      env: {
        DATABASE_URL: databaseUrl,
        LEASEHOLD_SCHEMA: schema,
        NODE_NO_WARNINGS: "1",
        // Local only (dev/local-env.ts): the Neon driver through the relay, handlers' output labelled by job.
        [LOCAL_ENV.wsProxy]: relay.address,
        [LOCAL_ENV.labelOutput]: "1",
      },
      onLog: options.onLog ? (fn, _id, line) => options.onLog!(fn, line) : () => {},
    });
    closers.push(() => runtime.close());

    const credentials = { accessKeyId: DEV_AWS.accessKeyId, secretAccessKey: DEV_AWS.secretAccessKey };
    const lambda = new LambdaClient({ endpoint: runtime.url, region: DEV_AWS.region, credentials });
    closers.push(async () => lambda.destroy());
    const apiToken = options.apiToken ?? randomBytes(24).toString("base64url");
    const waker = createSchedulerWaker(SCHEDULER, () => {}, lambda);
    // The recurring jobs' schedules, as infra/wake.ts deploys them, on the local EventBridge Scheduler.
    const eventBridge = new SchedulerClient({ endpoint: runtime.url, region: DEV_AWS.region, credentials });
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
    const app = createApp({
      registry, recurring, token: apiToken, waker, store: { db: pool, schema }, serving: servingRules(config),
      jobsModule: relative(root, jobsModule).split(sep).join("/"),
    });
    const server: ServerType = await new Promise((done, fail) => {
      const s = serve({ fetch: app.fetch, port: apiPort, hostname: "127.0.0.1" }, () => done(s));
      s.once("error", (err: NodeJS.ErrnoException) => fail(err.code === "EADDRINUSE" ? new PortInUseError(apiPort, options.portHint?.(apiPort + 1)) : err));
    });
    closers.push(() => new Promise((done) => {
      server.close(done);
      (server as { closeAllConnections?: () => void }).closeAllConnections?.();
    }));
    const { port } = server.address() as { port: number };
    const apiUrl = `http://127.0.0.1:${port}`;
    if (postgres) {
      // Only the embedded Postgres's stack: the one this checkout's tools default to.
      const published = { lambdaUrl: runtime.url, databaseUrl, schema, wsProxy: relay.address, schedulerFunction: SCHEDULER };
      const state: DevStackState = { pid: process.pid, apiUrl, ...published, env: devStackEnv(published) };
      mkdirSync(dirname(DEV_STATE_FILE), { recursive: true });
      writeFileSync(DEV_STATE_FILE, `${JSON.stringify(state, null, 2)}\n`);
      closers.push(async () => rmSync(DEV_STATE_FILE, { force: true }));
    }
    await wakeIfPending({ db: pool, schema }, waker);
    return {
      apiUrl,
      dashboardUrl: `${apiUrl}/dashboard#token=${encodeURIComponent(apiToken)}`,
      lambdaUrl: runtime.url,
      databaseUrl,
      schema,
      wsProxy: relay.address,
      stateFile: postgres ? DEV_STATE_FILE : null,
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
