/**
 * The scenarios' stage: a fresh schema, the WebSocket relay, and the local
 * Lambda runtime running the real scheduler, runners and rescuer as child
 * processes with a scenario config and the scenario job types (their
 * entries written by dev/functions.ts). The scheduler is driven as in production: by its
 * cron (here a ticker of ours, so a scenario can pause it) and by a wake-up
 * after every enqueue (`createSchedulerWaker`, exactly what the API uses).
 *
 * Every figure is read back from rows on the database clock: jobs.created_at
 * and run_at, the handlers' start/finish events (scenario_events), the
 * attempt rows, and a log of the runners table kept by a trigger.
 */
import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { startLambdaRuntime, type LambdaRuntime } from "../../dev/lambda/runtime.ts";
import type { FunctionStats, InflightInvocation } from "../../dev/lambda/pool.ts";
import { scheduledEvent } from "../../dev/lambda/schedule.ts";
import { LOCAL_REGION } from "../../dev/lambda/lambda-env.ts";
import { LOCAL_ENV } from "../../dev/local-env.ts";
import { startWsRelay } from "../../dev/ws-relay.ts";
import { createSchedulerWaker } from "../../functions/waker.ts";
import { defineConfig, type Config, type configSchema } from "../../shared/settings/config.ts";
import { runnerFunctions } from "../../shared/settings/function-specs.ts";
import { localFunctions } from "../../dev/functions.ts";
import appConfig from "../../leasehold.config.ts";
import type { Pool, Store } from "../../shared/db/db.ts";
import { createPgPool } from "../../shared/db/drivers/pg.ts";
import { enqueueJobs, type JobSpec } from "../../shared/jobs/enqueue.ts";
import type { EnqueuedJob, JobType } from "../../shared/jobs/job.ts";
import { migrate } from "../../shared/db/migrate.ts";
import type { Waker } from "../../shared/scheduler/wake.ts";
import { eventsTableSql } from "../../test/fixtures/scenario-jobs.ts";
import type { z } from "zod";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const SCENARIO_JOBS = fileURLToPath(new URL("../../test/fixtures/scenario-jobs.ts", import.meta.url));
export const DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres";

export type ConfigInput = z.input<typeof configSchema>;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The deployment's own config (leasehold.config.ts), with overrides. */
export function productionConfig(overrides: Pick<ConfigInput, "scheduler" | "rescuer" | "wake" | "runners"> = {}): ConfigInput {
  const base = JSON.parse(JSON.stringify(appConfig)) as Config;
  return {
    ...base,
    runners: overrides.runners ?? base.runners,
    scheduler: { ...base.scheduler, ...overrides.scheduler },
    rescuer: { ...base.rescuer, ...overrides.rescuer },
    wake: { ...base.wake, ...overrides.wake },
  };
}

/** A job type with another lease or backoff: what a job row gets is decided at enqueue. */
export function withLease<T extends JobType<any>>(type: T, leaseMs: number, backoffMs = type.backoffMs): T {
  return { ...type, leaseMs, backoffMs };
}

export interface CronOptions {
  /** Scheduler cron period (production: 60 s, the scheduler's timeout). */
  schedulerMs: number;
  /** Rescuer cron period (production: 60 s). */
  rescuerMs: number;
}

export interface ScenarioStackOptions {
  name: string;
  databaseUrl: string;
  /** An existing relay ("host:port"); default: start one. */
  wsRelay?: string;
  config: ConfigInput;
  /** Crons as ticked by EventBridge; false: wake-ups only. */
  cron: CronOptions | false;
  /** Idle execution environments are stopped after this long (runtime default 5 min). */
  idleEnvironmentMs?: number;
  /** Keep the schema after close (to look at the rows). */
  keepSchema?: boolean;
  onLog?: (fn: string, line: string) => void;
}

export interface ScenarioStack {
  name: string;
  schema: string;
  config: Config;
  /** Plain pg pool on the scenario database: the producer's and the reader's. */
  pool: Pool;
  store: Store;
  runtime: LambdaRuntime;
  lambda: LambdaClient;
  waker: Waker;
  /** Wake-up invokes sent and accepted (epoch ms), for the latency breakdown. */
  wakes: { sentAt: number; acceptedAt: number }[];
  logs: { fn: string; line: string; at: number }[];
  /** Enqueues through the core, then wakes the scheduler as the API does. */
  enqueue(specs: readonly JobSpec<any>[], options?: { wake?: boolean }): Promise<EnqueuedJob[]>;
  /** Stops cron ticks and wake-ups for `ms` and kills any scheduler invocation in flight. */
  pauseScheduling(ms: number): Promise<void>;
  /** SIGKILLs every runner process in flight; returns what was killed. */
  killRunners(): InflightInvocation[];
  /** SIGKILLs idle (warm, parked) processes of `fn`; returns their pids. */
  killIdleProcesses(fn: string): number[];
  stats(): Record<string, FunctionStats>;
  close(): Promise<void>;
}

export async function startScenarioStack(options: ScenarioStackOptions): Promise<ScenarioStack> {
  const closers: (() => Promise<unknown>)[] = [];
  let closed = false;
  const close = async () => {
    closed = true;
    for (const c of closers.reverse()) await c().catch((err) => console.error(`[${options.name}] close: ${String(err)}`));
  };
  try {
    const config = defineConfig(options.config);
    const schema = `sc_${options.name.replace(/[^a-z0-9]/g, "_")}_${randomBytes(4).toString("hex")}`;
    const pool = createPgPool(options.databaseUrl, 6);
    closers.push(() => pool.end());
    await migrate(pool, schema);
    if (!options.keepSchema) closers.push(() => pool.query(`drop schema "${schema}" cascade`));
    await pool.query(eventsTableSql(schema));
    await pool.query(RUNNER_LOG_SQL.replaceAll("SCHEMA", schema));
    const store: Store = { db: pool, schema };

    let wsRelay = options.wsRelay;
    if (!wsRelay) {
      const relay = await startWsRelay();
      closers.push(() => relay.close());
      wsRelay = relay.address;
    }

    const logs: ScenarioStack["logs"] = [];
    const runtime = await startLambdaRuntime({
      functions: localFunctions({ root: ROOT, config, jobsModule: SCENARIO_JOBS }).filter((f) => f.name !== "api" && f.name !== "migrate"),
      rootDir: ROOT,
      maxConcurrency: Object.fromEntries(runnerFunctions(config).map((f) => [f.name, f.maxConcurrency])),
      schedulePrecisionMs: config.wake.precisionMs,
      idleEnvironmentMs: options.idleEnvironmentMs,
      env: {
        DATABASE_URL: options.databaseUrl,
        LEASEHOLD_SCHEMA: schema,
        [LOCAL_ENV.wsProxy]: wsRelay,
        // Cold starts as on Lambda, which loads no source maps.
        [LOCAL_ENV.sourceMaps]: "0",
        POWERTOOLS_LOG_LEVEL: "WARN",
        NODE_NO_WARNINGS: "1",
      },
      onLog: (fn, _id, line) => {
        logs.push({ fn, line, at: Date.now() });
        options.onLog?.(fn, line);
      },
    });
    closers.push(() => runtime.close());

    const lambda = new LambdaClient({
      endpoint: runtime.url, region: LOCAL_REGION, credentials: { accessKeyId: "local", secretAccessKey: "local" }, maxAttempts: 1,
    });
    closers.push(async () => lambda.destroy());

    // The API's waker, over a client that notes when each wake-up was sent and accepted.
    const wakes: ScenarioStack["wakes"] = [];
    const timedClient = {
      send: async (command: InvokeCommand) => {
        const sentAt = Date.now();
        const out = await lambda.send(command);
        wakes.push({ sentAt, acceptedAt: Date.now() });
        return out;
      },
    } as unknown as LambdaClient;
    const realWaker = createSchedulerWaker("scheduler", (err) => console.error(`[${options.name}] wake failed: ${String(err)}`), timedClient);
    let pausedUntil = 0;
    const paused = () => Date.now() < pausedUntil;
    const waker: Waker = { wake: () => void (paused() || realWaker.wake()), settled: () => realWaker.settled() };
    closers.push(() => realWaker.settled());

    const tick = (fn: string, type: "Event" | "RequestResponse") =>
      lambda
        .send(new InvokeCommand({ FunctionName: fn, InvocationType: type, Payload: JSON.stringify(scheduledEvent(fn, LOCAL_REGION)) }))
        .catch((err) => closed || console.error(`[${options.name}] cron ${fn}: ${String(err)}`));
    const fire = (fn: string) => {
      if (fn === "scheduler" && paused()) return;
      void tick(fn, "Event");
    };
    if (options.cron) {
      const periods = { scheduler: options.cron.schedulerMs, rescuer: options.cron.rescuerMs };
      // In production the cron has been ticking all along: its functions are warm when a scenario begins. The first
      // tick runs to its end before the stack is handed over, so their cold starts (a few hundred ms of CPU each) do
      // not run beside the scenario's first jobs, and a wake-up finds the scheduler's environment warm. Then every period.
      await Promise.all(Object.keys(periods).map((fn) => tick(fn, "RequestResponse")));
      const timers = Object.entries(periods).map(([fn, ms]) => setInterval(() => fire(fn), ms));
      closers.push(async () => timers.forEach((t) => clearInterval(t)));
    }

    const killInflight = (match: (fn: string) => boolean) => {
      const victims = runtime.inflight().filter((i) => match(i.functionName));
      for (const v of victims) {
        try {
          process.kill(v.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
      return victims;
    };
    const runnerNames = new Set(runnerFunctions(config).map((f) => f.name));

    return {
      name: options.name, schema, config, pool, store, runtime, lambda, waker, wakes, logs,
      async enqueue(specs, { wake = true } = {}) {
        const jobs = await enqueueJobs(store, specs);
        if (wake) waker.wake();
        return jobs;
      },
      async pauseScheduling(ms) {
        pausedUntil = Date.now() + ms;
        killInflight((fn) => fn === "scheduler");
      },
      killRunners: () => killInflight((fn) => runnerNames.has(fn)),
      killIdleProcesses(fn) {
        const busy = new Set(runtime.inflight().map((i) => i.pid));
        const pids = childPidsOf(process.pid).filter((pid) => !busy.has(pid) && lambdaFunctionOf(pid) === fn);
        for (const pid of pids) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            // already gone
          }
        }
        return pids;
      },
      stats: () => runtime.stats(),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Logs the runners table: the scheduler's reservation (insert) and the runner's start (update). */
const RUNNER_LOG_SQL = `
create table "SCHEMA".scenario_runner_log (
  id text not null, runner text not null, request_id text, event text not null, at timestamptz not null default clock_timestamp());
create function "SCHEMA".scenario_log_runner() returns trigger language plpgsql as $$
begin
  insert into "SCHEMA".scenario_runner_log (id, runner, request_id, event)
  values (new.id, new.runner, new.request_id, case when tg_op = 'INSERT' and new.request_id is null then 'reserved' else 'started' end);
  return new;
end $$;
create trigger scenario_log_runner after insert or update on "SCHEMA".runners
for each row execute function "SCHEMA".scenario_log_runner();`;

function childPidsOf(parent: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === parent) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

function lambdaFunctionOf(pid: number): string | undefined {
  try {
    const env = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    return env.find((e) => e.startsWith("AWS_LAMBDA_FUNCTION_NAME="))?.slice("AWS_LAMBDA_FUNCTION_NAME=".length);
  } catch {
    return undefined;
  }
}

/** Waits until no runner invocation is in flight (the scheduler's cron may go on). */
export async function runnersIdle(stack: Pick<ScenarioStack, "runtime" | "config">, deadline: number): Promise<boolean> {
  for (;;) {
    if (runnerFunctions(stack.config).every((f) => stack.runtime.running(f.name) === 0)) return true;
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
}

export * from "./figures.ts";
export * from "./timelines.ts";
