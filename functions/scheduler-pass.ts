import { randomUUID } from "node:crypto";
import type { Config } from "../shared/settings/config.ts";
import type { Pool } from "../shared/db/db.ts";
import type { Environment } from "../shared/settings/environment.ts";
import { schedulePass as sharedPass } from "../shared/scheduler/fanout.ts";
import type { Registry } from "../shared/jobs/job.ts";
import { logger } from "./observability.ts";

/** Deployed function name of each runner (infra sets the map; locally the config name is the function name). */
export function runnerFunction(env: Environment, name: string): string {
  return env.runnerFunctions[name] ?? name;
}

/** Starts one runner invocation (asynchronously); throws when Lambda refuses it. `waitUntil`: started ahead of a due job. */
export type InvokeRunner = (runner: string, invocationId: string, waitUntil?: number) => Promise<unknown>;

/**
 * One look at demand and the fan-out it needs (the shared `schedulePass`).
 * `invoked` counts the invocations Lambda accepted; a refused one is logged
 * and its reservation dropped, and it counts for nothing. `horizonMs` counts
 * jobs coming due that soon as demand; the runners started for them wait
 * until `waitUntil`.
 */
export async function schedulePass(
  app: { config: Config; registry: Registry }, pool: Pool, schemaName: string, invoke: InvokeRunner,
  options: { horizonMs?: number; waitUntil?: number; canStart?: (runnerFunction: string) => boolean } = {},
): Promise<{ ready: number; invoked: number; covered: boolean }> {
  const { config, registry } = app;
  const failed = new Map<string, number>();
  const result = await sharedPass({
    pool,
    schema: schemaName,
    runners: Object.entries(config.runners),
    names: registry.keys(),
    maxRunners: Math.floor(config.connectionBudget / config.connectionsPerRunner),
    horizonMs: options.horizonMs,
    canStart: options.canStart,
    newId: randomUUID,
    invoke: async (name, id) => {
      await invoke(name, id, options.waitUntil);
    },
    onInvokeError: (name) => void failed.set(name, (failed.get(name) ?? 0) + 1),
  });
  const invoked = [...result.invoked.values()].reduce((a, b) => a + b, 0);
  const fields = () => ({ ready: Object.fromEntries(result.ready), invoked: Object.fromEntries(result.invoked), failed: Object.fromEntries(failed) });
  if (invoked > 0) logger.info("runners invoked", fields());
  if (failed.size > 0) logger.warn("runner invokes failed", fields());
  return { ready: result.total, invoked, covered: result.covered };
}
