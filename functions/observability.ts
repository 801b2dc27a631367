import { Logger } from "@aws-lambda-powertools/logger";
import { Metrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import { Dimension, METRICS_NAMESPACE, SERVICE_NAME, type MetricName } from "../shared/metrics-names.ts";
import type { WorkerLog } from "../shared/worker.ts";

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
 * never lands on the service-wide metrics (see shared/metrics-names.ts).
 */
export function publishPerQueue(values: Map<string, [MetricName, Unit, number][]>): void {
  for (const [queue, metrics] of values) {
    const m = serviceMetrics();
    m.addDimension(Dimension.Queue, queue);
    for (const [name, unit, value] of metrics) m.addMetric(name, unit, value);
    m.publishStoredMetrics();
  }
}

export { MetricUnit };
