import { config as bundledConfig, defineConfig, type Config, type EdgeConfig } from "../../shared/config.ts";
import { DEFAULT_SCHEMA } from "../../shared/config.ts";
import { deathFields, type DeadJob } from "../../shared/deaths.ts";
import type { Pool } from "../../shared/db.ts";
import { createNeonPool } from "../../shared/drivers/neon.ts";
import type { WorkerLog } from "../../shared/worker.ts";

/**
 * What the edge Worker gets from its bindings (set in infra/edge.ts; in tests,
 * by miniflare). Workers have no process environment: everything is here.
 */
export interface EdgeEnv {
  DATABASE_URL: string;
  /** Shared by the scheduler and the runner Worker: a runner request must carry it. */
  RUNNER_SECRET: string;
  /** The runner Worker, as a service binding... */
  RUNNER?: { fetch(input: RequestInfo, init?: RequestInit): Promise<Response> };
  /** ...or as a URL (`https://.../leasehold/run`). */
  RUNNER_URL?: string;
  /** The API's bearer token; without it the Worker serves no API routes. */
  API_TOKEN?: string;
  LEASEHOLD_SCHEMA?: string;
  /** The configuration as JSON, when not the bundled `shared/config.ts` (tests). */
  LEASEHOLD_CONFIG?: string;
  /** Local development and tests only: a WebSocket-to-TCP relay ("host:port") in front of a plain Postgres. */
  LEASEHOLD_WS_PROXY?: string;
  /** Optional Workers Analytics Engine dataset: one data point per dead job. */
  LEASEHOLD_METRICS?: { writeDataPoint(point: { blobs?: string[]; doubles?: number[]; indexes?: string[] }): void };
}

/** Keeps work alive after the response (Workers' ExecutionContext). */
export interface WaitUntil {
  waitUntil(promise: Promise<unknown>): void;
}

export function edgeConfig(env: EdgeEnv): { config: Config; edge: EdgeConfig } {
  const config = env.LEASEHOLD_CONFIG ? defineConfig(JSON.parse(env.LEASEHOLD_CONFIG)) : bundledConfig;
  if (!config.edge) throw new Error("config.edge is not set: this deployment runs no edge consumer");
  return { config, edge: config.edge };
}

export function edgeSchema(env: EdgeEnv): string {
  return env.LEASEHOLD_SCHEMA ?? DEFAULT_SCHEMA;
}

/** A Neon pool over WebSocket for one invocation; end it before the invocation ends. */
export function openEdgePool(env: EdgeEnv, max: number): Pool {
  return createNeonPool(env.DATABASE_URL, { max, wsProxy: env.LEASEHOLD_WS_PROXY });
}

/**
 * Structured logs: one JSON object per line on the console, which Workers
 * Logs (and Logpush) index by field, as CloudWatch does the Lambda's.
 */
function line(level: "info" | "warn" | "error", message: string, fields?: Record<string, unknown>): void {
  const entry = JSON.stringify({ level, message, service: "leasehold", ...fields });
  if (level === "error") console.error(entry);
  else if (level === "warn") console.warn(entry);
  else console.log(entry);
}

export const edgeLog: WorkerLog = {
  info: (message, fields) => line("info", message, fields),
  warn: (message, fields) => line("warn", message, fields),
  error: (message, fields) => line("error", message, fields),
};

/**
 * Deaths on the edge: the same `"job dead"` line per job as on Lambda, and a
 * data point in the Analytics Engine dataset when one is bound (the counter
 * an alert can watch; see docs/deploy.md).
 */
export function edgeReportDeaths(env: EdgeEnv): (deaths: DeadJob[]) => void {
  return (deaths) => {
    for (const d of deaths) {
      edgeLog.error("job dead", deathFields(d));
      env.LEASEHOLD_METRICS?.writeDataPoint({ blobs: ["job dead", d.queue, d.name], doubles: [1], indexes: [d.queue] });
    }
  };
}
