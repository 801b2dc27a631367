import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import type { Context } from "aws-lambda";
import { randomUUID } from "node:crypto";
import { config } from "../shared/config.ts";
import type { Pool } from "../shared/db.ts";
import { schedulePass as sharedPass } from "../shared/fanout.ts";
import { closePool, openPool, schema } from "./env.ts";
import { logger } from "./observability.ts";
import { registry } from "./registry.ts";

/**
 * The scheduler: triggered every minute by EventBridge, it keeps the queue
 * responsive within that minute by looking at demand (ready jobs per runner,
 * runners already live) every `pollMs` until its time is nearly up, and fans
 * out runner invocations (`InvocationType: "Event"`) for the demand live
 * runners will not absorb (only jobs a runner can claim: its queues, the job
 * types it was deployed with, leases it allows), within each runner's
 * maximum concurrency and the database connection budget. An enqueue can wake it (`{ source:
 * "leasehold.wake" }`): it then makes one pass and returns.
 *
 * Nothing runs while the queue is empty: after `IDLE_PASSES` passes in a row
 * with no ready job, it returns early. A delayed job that comes due while
 * everything is idle then starts at the next cron tick (within a minute);
 * while there is work, within a second.
 */

/** Time kept back at the end of an invocation. */
const SCHEDULER_MARGIN_MS = 3_000;
/** Passes in a row with nothing ready before the scheduler returns early. */
export const IDLE_PASSES = 5;

const lambda = new LambdaClient({});

/** Deployed function name of each runner (infra sets the map; locally the config name is the function name). */
function runnerFunction(name: string): string {
  const names = JSON.parse(process.env.LEASEHOLD_RUNNER_FUNCTIONS ?? "{}") as Record<string, string>;
  return names[name] ?? name;
}

/** Starts one runner invocation (asynchronously); throws when Lambda refuses it. */
export type InvokeRunner = (runner: string, invocationId: string) => Promise<unknown>;

const invokeRunner: InvokeRunner = (name, id) =>
  lambda.send(new InvokeCommand({ FunctionName: runnerFunction(name), InvocationType: "Event", Payload: JSON.stringify({ invocationId: id }) }));

/**
 * One look at demand and the fan-out it needs (the shared `schedulePass`).
 * `invoked` counts the invocations Lambda accepted; a refused one is logged
 * and its reservation dropped, and it counts for nothing.
 */
export async function schedulePass(pool: Pool, schemaName: string, invoke: InvokeRunner = invokeRunner): Promise<{ ready: number; invoked: number }> {
  const result = await sharedPass({
    pool,
    schema: schemaName,
    runners: Object.entries(config.runners),
    names: registry.keys(),
    maxRunners: Math.floor(config.connectionBudget / config.connectionsPerRunner),
    newId: randomUUID,
    invoke: async (name, id) => {
      await invoke(name, id);
    },
    onInvokeError: (name, err) => logger.error("runner invoke failed", { runner: name, error: String(err) }),
  });
  if (result.reserved > 0) {
    logger.info("runners invoked", { ready: Object.fromEntries(result.ready), invoked: Object.fromEntries(result.invoked) });
  }
  return { ready: result.total, invoked: [...result.invoked.values()].reduce((a, b) => a + b, 0) };
}

export async function handler(event: unknown, context: Context): Promise<{ passes: number; invoked: number }> {
  logger.addContext(context);
  const wake = (event as { source?: unknown } | null)?.source === "leasehold.wake";
  const pollMs = config.scheduler.pollMs;
  const pool = openPool(2);
  let passes = 0;
  let invoked = 0;
  let idle = 0;
  try {
    for (;;) {
      const started = Date.now();
      const pass = await schedulePass(pool, schema());
      invoked += pass.invoked;
      idle = pass.ready === 0 ? idle + 1 : 0;
      passes++;
      if (wake || idle >= IDLE_PASSES || context.getRemainingTimeInMillis() < pollMs + SCHEDULER_MARGIN_MS) break;
      await new Promise((r) => setTimeout(r, Math.max(0, pollMs - (Date.now() - started))));
    }
  } finally {
    await closePool(pool);
  }
  return { passes, invoked };
}
