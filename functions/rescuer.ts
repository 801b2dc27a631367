import type { Context } from "aws-lambda";
import { config } from "../shared/config.ts";
import { pruneRunners } from "../shared/fleet.ts";
import { Metric, type MetricName } from "../shared/metrics-names.ts";
import { describeDeaths } from "../shared/deaths.ts";
import { rescueExpiredLeases, type RescueResult } from "../shared/rescue.ts";
import { pruneJobs, queueStats } from "../shared/stats.ts";
import { closePool, openPool, schema } from "./env.ts";
import { logger, MetricUnit, publishPerQueue, reportDeaths, serviceMetrics, type Unit } from "./observability.ts";

/**
 * The rescuer: cron-triggered, it records the death of runners (an expired
 * lease whose handler had started becomes a `lease_expired` attempt and the
 * job is re-queued or marked dead; one that never started gets its attempt
 * back),
 * publishes the metrics the alarms watch (DeadJobs, RescuedJobs, ReadyJobs and
 * OldestReadyAgeSeconds per queue), logs each dead job with its reasons, and
 * prunes finished jobs past their retention.
 */
export async function handler(_event: unknown, context: Context): Promise<Omit<RescueResult, "deadIds"> & { pruned: number }> {
  logger.addContext(context);
  const pool = openPool(2);
  const store = { db: pool, schema: schema() };
  try {
    const result = await rescueExpiredLeases(store);
    reportDeaths(await describeDeaths(store, result.deadIds), true);
    const service = serviceMetrics();
    service.addMetric(Metric.RescuedJobs, MetricUnit.Count, result.rescued);
    service.publishStoredMetrics();

    // Every configured queue reports, even when empty, so alarms have data.
    const perQueue = new Map<string, [MetricName, Unit, number][]>();
    for (const queue of Object.values(config.runners).flatMap((r) => r.queues)) {
      perQueue.set(queue, [[Metric.ReadyJobs, MetricUnit.Count, 0], [Metric.OldestReadyAgeSeconds, MetricUnit.Seconds, 0]]);
    }
    for (const s of await queueStats(store)) {
      perQueue.set(s.queue, [
        [Metric.ReadyJobs, MetricUnit.Count, s.ready],
        [Metric.OldestReadyAgeSeconds, MetricUnit.Seconds, s.oldestReadyAgeSeconds],
      ]);
    }
    publishPerQueue(perQueue);

    const pruned = await pruneJobs(store, config.retentionDays * 24 * 3600_000, { maxBatches: 20 });
    await pruneRunners(store);
    logger.info("rescue done", { rescued: result.rescued, refunded: result.refunded, dead: result.dead, pruned });
    return { rescued: result.rescued, refunded: result.refunded, dead: result.dead, pruned };
  } finally {
    await closePool(pool);
  }
}
