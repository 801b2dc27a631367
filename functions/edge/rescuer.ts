import { closePool } from "../../shared/db/db.ts";
import { describeDeaths } from "../../shared/observe/deaths.ts";
import { pruneRunners } from "../../shared/scheduler/fleet.ts";
import type { Registry } from "../../shared/jobs/job.ts";
import { rescueExpiredLeases } from "../../shared/lifecycle/rescue.ts";
import { claimable } from "../../shared/settings/serving.ts";
import { pruneJobs, queueStats } from "../../shared/observe/stats.ts";
import { edgeConfig, edgeLog, edgeReportDeaths, edgeSchema, openEdgePool, type EdgeEnv } from "./env.ts";

/**
 * The edge rescuer, a Cron Trigger: the Lambda rescuer's work on Workers. It
 * records the death of runners (expired leases), reports each dead job once
 * through the one death describer, logs each queue's depth and the jobs no
 * runner can claim (unserved), and prunes finished jobs past their retention.
 */
export async function runEdgeRescuer(env: EdgeEnv, registry: Registry): Promise<{ rescued: number; refunded: number; dead: number; pruned: number; unserved: number }> {
  const { config } = edgeConfig(env);
  const pool = openEdgePool(env, 1);
  const store = { db: pool, schema: edgeSchema(env) };
  try {
    const result = await rescueExpiredLeases(store);
    edgeReportDeaths(env)(await describeDeaths(store, result.deadIds));
    const stats = await queueStats(store, claimable(config, registry.keys()));
    for (const s of stats) edgeLog.info("queue stats", { ...s });
    const pruned = await pruneJobs(store, config.retentionDays * 24 * 3600_000, { maxBatches: 20 });
    await pruneRunners(store);
    const unserved = Object.fromEntries(stats.filter((s) => s.unserved > 0).map((s) => [s.queue, s.unserved]));
    if (Object.keys(unserved).length > 0) edgeLog.warn("jobs no runner can claim are waiting", { unserved });
    const summary = {
      rescued: result.rescued, refunded: result.refunded, dead: result.dead, pruned,
      unserved: stats.reduce((n, s) => n + s.unserved, 0),
    };
    edgeLog.info("rescue done", summary);
    return summary;
  } finally {
    await closePool(pool);
  }
}
