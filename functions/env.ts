import { Resource } from "sst";
import WebSocket from "ws";
import { DEFAULT_SCHEMA } from "../shared/config.ts";
import type { Pool } from "../shared/db.ts";
import { createNeonPool } from "../shared/drivers/neon.ts";

/**
 * What every function needs from its environment. Deployed, secrets come
 * through SST's `Resource` (linked in infra/); locally and in tests, from
 * environment variables set by the local Lambda runtime.
 */

/** `Resource[name].value` when SST links it; SST's `Resource` throws on any other access. */
export type LinkedResources = Record<string, { value?: unknown } | undefined>;

/**
 * A linked SST secret's value, or undefined when SST links are not active
 * (local development, tests). `resources` defaults to SST's `Resource`.
 */
export function linkedSecret(name: string, resources: LinkedResources = Resource as unknown as LinkedResources): string | undefined {
  try {
    if (!(name in resources)) return undefined;
    const value = resources[name]?.value;
    return typeof value === "string" && value ? value : undefined;
  } catch {
    return undefined;
  }
}

export function databaseUrl(): string {
  const url = linkedSecret("DatabaseUrl") ?? process.env.DATABASE_URL;
  if (!url) throw new Error("no database URL: link the DatabaseUrl secret or set DATABASE_URL");
  return url;
}

export function schema(): string {
  return process.env.LEASEHOLD_SCHEMA ?? DEFAULT_SCHEMA;
}

/**
 * A Neon pool for this invocation only: a Lambda must open, use and close it
 * within one invocation. `LEASEHOLD_WS_PROXY` routes it through a local
 * WebSocket relay to a plain Postgres.
 */
export function openPool(max: number): Pool {
  return createNeonPool(databaseUrl(), {
    max,
    wsProxy: process.env.LEASEHOLD_WS_PROXY,
    webSocketConstructor: globalThis.WebSocket ? undefined : WebSocket,
  });
}

// Re-exported: every function closes its pool this way, on Lambda and on the edge.
export { closePool, POOL_CLOSE_MS } from "../shared/db.ts";
