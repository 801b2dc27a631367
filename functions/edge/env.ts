import { defineConfig, type Config, type ConfigInput, type EdgeConfig } from "../../shared/settings/config.ts";
import { resolveSettings } from "../../shared/settings/settings.ts";
import { deathFields, type DeadJob } from "../../shared/observe/deaths.ts";
import type { Pool } from "../../shared/db/db.ts";
import { createNeonPool } from "../../shared/db/drivers/neon.ts";
import { EDGE_ENV, ENV } from "../../shared/settings/environment.ts";
import type { WorkerLog } from "../../shared/runner/worker.ts";

/**
 * What the edge Worker gets from its bindings (set in infra/edge.ts; in tests,
 * by miniflare), each named by the contract (`EDGE_ENV`, shared/settings/environment.ts).
 * Workers have no process environment: everything is here. Secrets are plain
 * bindings (tests, wrangler) or linked SST secrets, which SST binds as
 * `SST_RESOURCE_<Name>` JSON (`DatabaseUrl`, `RunnerSecret`, `ApiToken`):
 * read them with `edgeSecret`.
 */
export interface EdgeEnv {
  [EDGE_ENV.databaseUrl]?: string;
  [EDGE_ENV.runnerSecret]?: string;
  [EDGE_ENV.apiToken]?: string;
  [EDGE_ENV.runnerService]?: { fetch(input: RequestInfo, init?: RequestInit): Promise<Response> };
  [EDGE_ENV.runnerUrl]?: string;
  [EDGE_ENV.schema]?: string;
  [EDGE_ENV.config]?: string;
  [EDGE_ENV.metrics]?: { writeDataPoint(point: { blobs?: string[]; doubles?: number[]; indexes?: string[] }): void };
}

/** Keeps work alive after the response (Workers' ExecutionContext). */
export interface WaitUntil {
  waitUntil(promise: Promise<unknown>): void;
}

/** The secrets, by their key in `EDGE_ENV`, and the SST secret each is linked as. */
const LINKED = { databaseUrl: "DatabaseUrl", runnerSecret: "RunnerSecret", apiToken: "ApiToken" } as const;

/** A secret from its plain binding, else from the SST link SST made for it. */
export function edgeSecret(env: EdgeEnv, key: keyof typeof LINKED): string | undefined {
  const plain = env[EDGE_ENV[key]];
  if (plain) return plain;
  const linked = (env as unknown as Record<string, unknown>)[`SST_RESOURCE_${LINKED[key]}`];
  if (typeof linked !== "string") return undefined;
  try {
    const value = (JSON.parse(linked) as { value?: unknown }).value;
    return typeof value === "string" && value ? value : undefined;
  } catch {
    return undefined;
  }
}

export function edgeConfig(env: EdgeEnv, built?: ConfigInput | Config): { config: Config; edge: EdgeConfig } {
  const json = env[EDGE_ENV.config];
  const config = defineConfig(json ? JSON.parse(json) : ((built ?? {}) as ConfigInput));
  if (!config.edge) throw new Error("config.edge is not set: this deployment runs no edge consumer");
  return { config, edge: config.edge };
}

/** The schema, resolved as everywhere (shared/settings/settings.ts): the binding, else the config's. */
export function edgeSchema(env: EdgeEnv, config?: { schema: string }): string {
  return resolveSettings({ env: { [ENV.schema]: env[EDGE_ENV.schema] }, config }).schema;
}

/** A Neon pool over WebSocket for one invocation; end it before the invocation ends. */
export function openEdgePool(env: EdgeEnv, max: number): Pool {
  const url = edgeSecret(env, "databaseUrl");
  if (!url) throw new Error(`no database URL: link the DatabaseUrl secret or bind ${EDGE_ENV.databaseUrl}`);
  return createNeonPool(url, { max });
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
      env[EDGE_ENV.metrics]?.writeDataPoint({ blobs: ["job dead", d.queue, d.name], doubles: [1], indexes: [d.queue] });
    }
  };
}
