import { Resource } from "sst";
import WebSocket from "ws";
import type { Pool } from "../shared/db/db.ts";
import { createNeonPool } from "../shared/db/drivers/neon.ts";
import { processEnvironment, type EnvSource } from "../shared/settings/environment.ts";
import { resolveSettings, type Settings } from "../shared/settings/settings.ts";

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

/**
 * The settings of a function, resolved once at its cold start (see
 * shared/settings/settings.ts): linked secrets first, then the environment infra set,
 * then the config the handler was built with.
 */
export function functionSettings(config: { schema: string }, env: EnvSource = processEnvironment()): Settings {
  return resolveSettings({ secret: (name) => linkedSecret(name), env, config });
}

/**
 * A Neon pool for this invocation only: a Lambda must open, use and close it
 * within one invocation. `wsProxy`: through that WebSocket relay to a plain
 * Postgres (linkedLeasehold() on the dev stack's database); the functions
 * give none.
 */
export function openPool(settings: Settings, max: number, wsProxy?: string): Pool {
  if (!settings.databaseUrl) throw new Error("no database URL: link the DatabaseUrl secret or set DATABASE_URL");
  return createNeonPool(settings.databaseUrl, {
    max,
    wsProxy,
    webSocketConstructor: globalThis.WebSocket ? undefined : WebSocket,
  });
}

// Re-exported: every function closes its pool this way, on Lambda and on the edge.
export { closePool, POOL_CLOSE_MS } from "../shared/db/db.ts";
