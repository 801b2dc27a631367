import type { Context } from "aws-lambda";
import { pruneRunners } from "../shared/scheduler/fleet.ts";
import { Metric, type MetricName } from "../shared/observe/metrics-names.ts";
import { describeDeaths } from "../shared/observe/deaths.ts";
import { rescueExpiredLeases, type RescueResult } from "../shared/lifecycle/rescue.ts";
import { pruneJobs, queueStats } from "../shared/observe/stats.ts";
import { claimable } from "../shared/settings/serving.ts";
import { resolveApp, type LeaseholdApp } from "./app.ts";
import { closePool, openPool } from "./env.ts";
import { logger, MetricUnit, publishPerQueue, reportDeaths, serviceMetrics, type Unit } from "./observability.ts";

/**
 * The rescuer: cron-triggered, it records the death of runners (an expired
 * lease whose handler had started becomes a `lease_expired` attempt and the
 * job is re-queued or marked dead; one whose start is not on record gets its
 * attempt back),
 * publishes the metrics the alarms watch (DeadJobs, RescuedJobs,
 * UnservedJobs; ReadyJobs, OldestReadyAgeSeconds and JobsUnserved per queue),
 * logs each dead job with its reasons, and prunes finished jobs past their
 * retention. Unserved jobs are ready jobs no runner can claim, by the config
 * and the job types the functions were deployed with.
 */
type RescuerSummary = Omit<RescueResult, "deadIds"> & { pruned: number; unserved: number };

/** The rescuer's Lambda handler, for the app's job types and config. */
export function createRescuerHandler(app: LeaseholdApp): (event: unknown, context: Context) => Promise<RescuerSummary> {
  const { registry, config, settings } = resolveApp(app);
  return async (_event, context) => {
    logger.addContext(context);
    const pool = openPool(settings, 2);
    const store = { db: pool, schema: settings.schema };
    try {
      const result = await rescueExpiredLeases(store);
      reportDeaths(await describeDeaths(store, result.deadIds), true);
      const stats = await queueStats(store, claimable(config, registry.keys()));
      const service = serviceMetrics();
      service.addMetric(Metric.RescuedJobs, MetricUnit.Count, result.rescued);
      const unservedJobs = stats.reduce((n, s) => n + s.unserved, 0);
      service.addMetric(Metric.UnservedJobs, MetricUnit.Count, unservedJobs);
      service.publishStoredMetrics();

      // Every configured queue reports, even when empty, so alarms have data;
      // so does any other queue with jobs (all of its ready jobs are unserved).
      const perQueue = new Map<string, [MetricName, Unit, number][]>();
      for (const queue of Object.values(config.runners).flatMap((r) => r.queues)) {
        perQueue.set(queue, [
          [Metric.ReadyJobs, MetricUnit.Count, 0], [Metric.OldestReadyAgeSeconds, MetricUnit.Seconds, 0], [Metric.JobsUnserved, MetricUnit.Count, 0],
        ]);
      }
      for (const s of stats) {
        perQueue.set(s.queue, [
          [Metric.ReadyJobs, MetricUnit.Count, s.ready],
          [Metric.OldestReadyAgeSeconds, MetricUnit.Seconds, s.oldestReadyAgeSeconds],
          [Metric.JobsUnserved, MetricUnit.Count, s.unserved],
        ]);
      }
      publishPerQueue(perQueue);

      const pruned = await pruneJobs(store, config.retentionDays * 24 * 3600_000, { maxBatches: 20 });
      await pruneRunners(store);
      const unserved = Object.fromEntries(stats.filter((s) => s.unserved > 0).map((s) => [s.queue, s.unserved]));
      if (Object.keys(unserved).length > 0) logger.warn("jobs no runner can claim are waiting", { unserved });
      logger.info("rescue done", { rescued: result.rescued, refunded: result.refunded, dead: result.dead, pruned });
      return { rescued: result.rescued, refunded: result.refunded, dead: result.dead, pruned, unserved: unservedJobs };
    } finally {
      await closePool(pool);
    }
  };
}
