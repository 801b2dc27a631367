import { closePool } from "../../shared/db/db.ts";
import { WORKERS_MAX_CONNECTIONS } from "../../shared/settings/config.ts";
import { schedulePass } from "../../shared/scheduler/fanout.ts";
import type { Registry } from "../../shared/jobs/job.ts";
import { edgeConfig, edgeLog, edgeSchema, openEdgePool, type EdgeEnv, type WaitUntil } from "./env.ts";
import { startEdgeRunner } from "./runner.ts";

/**
 * The edge scheduler, a Cron Trigger: the Lambda scheduler's passes (the
 * shared `schedulePass`), each runner started by a fetch to the runner
 * Worker. It holds each runner's streamed response until the runner ends,
 * so it starts at most as many runners at once as its connection limit
 * leaves (6, less its own database connection); the cron invocation lives
 * on (`waitUntil`) until they are done.
 */
/** Passes in a row with nothing ready before the scheduler stops passing. */
export const EDGE_IDLE_PASSES = 5;
/** The scheduler's own connection to the database. */
const POOL_SIZE = 1;

export async function runEdgeScheduler(env: EdgeEnv, ctx: WaitUntil, registry: Registry): Promise<{ passes: number; invoked: number }> {
  const { config, edge } = edgeConfig(env);
  const startedAt = Date.now();
  const pool = openEdgePool(env, POOL_SIZE);
  const held = new Set<Promise<unknown>>();
  let passes = 0;
  let invoked = 0;
  let idle = 0;
  try {
    for (;;) {
      const passAt = Date.now();
      const result = await schedulePass({
        pool,
        schema: edgeSchema(env),
        runners: Object.entries(edge.runners),
        names: registry.keys(),
        maxRunners: Math.floor(config.connectionBudget / edge.connectionsPerRunner),
        maxStarts: WORKERS_MAX_CONNECTIONS - POOL_SIZE - held.size,
        invoke: async (name, id) => {
          const { finished } = await startEdgeRunner(env, name, id);
          const p: Promise<unknown> = finished
            .then((summary) => edgeLog.info("edge runner ended", { runner: name, invocationId: id, summary: summary.trim() }))
            .catch((err) => edgeLog.warn("edge runner ended abruptly", { runner: name, invocationId: id, error: String(err) }))
            .finally(() => held.delete(p));
          held.add(p);
        },
        onInvokeError: (name, err) => edgeLog.error("edge runner start failed", { runner: name, error: String(err) }),
      });
      const started = [...result.invoked.values()].reduce((a, b) => a + b, 0);
      invoked += started;
      if (started > 0) edgeLog.info("runners invoked", { ready: Object.fromEntries(result.ready), invoked: Object.fromEntries(result.invoked) });
      idle = result.total === 0 ? idle + 1 : 0;
      passes++;
      const elapsed = Date.now() - startedAt;
      if (idle >= EDGE_IDLE_PASSES || elapsed + edge.scheduler.pollMs >= edge.scheduler.wallMs) break;
      await new Promise((r) => setTimeout(r, Math.max(0, edge.scheduler.pollMs - (Date.now() - passAt))));
    }
  } finally {
    await closePool(pool);
  }
  // The cron invocation stays alive while its runners run.
  const all = Promise.all(held);
  ctx.waitUntil(all);
  await all;
  return { passes, invoked };
}
