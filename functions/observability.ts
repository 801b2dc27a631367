import { Logger } from "@aws-lambda-powertools/logger";
import { Metrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import { deathFields, type DeadJob } from "../shared/observe/deaths.ts";
import { Dimension, Metric, METRICS_NAMESPACE, SERVICE_NAME, type MetricName } from "../shared/observe/metrics-names.ts";
import type { WorkerLog } from "../shared/runner/worker.ts";

export type Unit = (typeof MetricUnit)[keyof typeof MetricUnit];

/** Structured JSON logs (Powertools Logger) for every function. */
export const logger = new Logger({ serviceName: SERVICE_NAME });

/** The core's log seam, written to the Powertools logger. */
export const workerLog: WorkerLog = {
  info: (message, fields) => logger.info(message, { ...fields }),
  warn: (message, fields) => logger.warn(message, { ...fields }),
  error: (message, fields) => logger.error(message, { ...fields }),
};

/** Whole-service counters, dimension `service` only. */
export function serviceMetrics(): Metrics {
  return new Metrics({ namespace: METRICS_NAMESPACE, serviceName: SERVICE_NAME });
}

/**
 * Publishes per-queue metrics, each queue in a flush of its own so `queue`
 * never lands on the service-wide metrics (see shared/observe/metrics-names.ts).
 */
export function publishPerQueue(values: Map<string, [MetricName, Unit, number][]>): void {
  for (const [queue, metrics] of values) {
    const m = serviceMetrics();
    m.addDimension(Dimension.Queue, queue);
    for (const [name, unit, value] of metrics) m.addMetric(name, unit, value);
    m.publishStoredMetrics();
  }
}

/**
 * Reports deaths, whichever function saw them: one `"job dead"` line per job
 * with every attempt's reason, `DeadJobs` (the alarmed count) and `JobsDead`
 * per queue, published at once so that a runner dying next loses none.
 * `alwaysPublish` sends a 0 too (the rescuer does, so the alarm has data).
 */
export function reportDeaths(deaths: readonly DeadJob[], alwaysPublish = false): void {
  for (const d of deaths) {
    logger.error("job dead", deathFields(d));
  }
  if (deaths.length === 0 && !alwaysPublish) return;
  const service = serviceMetrics();
  service.addMetric(Metric.DeadJobs, MetricUnit.Count, deaths.length);
  service.publishStoredMetrics();
  const perQueue = new Map<string, [MetricName, Unit, number][]>();
  for (const d of deaths) {
    const count = (perQueue.get(d.queue)?.[0]?.[2] ?? 0) + 1;
    perQueue.set(d.queue, [[Metric.JobsDead, MetricUnit.Count, count]]);
  }
  publishPerQueue(perQueue);
}

export { MetricUnit };
