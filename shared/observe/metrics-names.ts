/**
 * The CloudWatch metric contract between the functions that publish metrics
 * (through Powertools Metrics / EMF) and `infra/`, which alarms and draws
 * dashboards on them. A CloudWatch alarm only matches a metric whose
 * namespace, name and *complete* set of dimensions are identical, so both
 * sides must use these constants and nothing else.
 *
 * Kept free of SST and AWS imports: the functions import it at runtime.
 *
 * Dimensions, by metric (see `METRIC_DIMENSIONS`):
 * - Powertools Metrics adds `service` (= SERVICE_NAME, from `serviceName` or
 *   POWERTOOLS_SERVICE_NAME) as a default dimension to every metric it
 *   publishes. Infra sets POWERTOOLS_SERVICE_NAME and
 *   POWERTOOLS_METRICS_NAMESPACE on every function from these constants.
 * - Whole-service counters carry `service` only, no `queue`:
 *   DeadJobs (published by whichever function ended a job dead, and by the
 *   rescuer every run, 0 included), RescuedJobs (the rescuer), StaleSettles
 *   (fencing refusals: a runner that lost its lease tried to settle) and
 *   UnservedJobs (the rescuer, every run: ready jobs no runner can claim, on
 *   every queue, configured or not). The alarms on DeadJobs, StaleSettles and
 *   UnservedJobs use `{ service }` exactly.
 * - Per-queue gauges carry `service` and `queue`: ReadyJobs,
 *   OldestReadyAgeSeconds and JobsUnserved, published by the rescuer once per
 *   queue per run (every configured queue, and any other with jobs). The
 *   oldest-ready-age alarm exists once per configured queue.
 * - Per-queue outcome counters carry `service` and `queue`: JobsSucceeded,
 *   JobsFailed, JobsTimedOut (published by the runner), JobsDead (with each
 *   DeadJobs count).
 * - The scheduler's Invokes carry `service` and `function` (the function's
 *   name in the config: a runner, its `-light` variant, `scheduler` for the
 *   hand-over to a successor, `rescuer`): InvokesAccepted and InvokeFailures,
 *   published after each pass that invoked. The InvokeFailures alarm exists
 *   once per function. WatchLost (`service` only) counts scheduler
 *   invocations that ended with work due and nothing left to watch it.
 * A publisher that adds another dimension (e.g. a job name) to one of these
 * metrics creates a *different* metric that no alarm watches; publish such
 * detail in a separate metric set or in the log line instead. With
 * Powertools, `addDimension` applies to every metric of the next flush, so
 * publish per-queue metrics through `metrics.singleMetric()` (or a separate
 * flush) to keep `queue` off DeadJobs/RescuedJobs/StaleSettles.
 */

export const METRICS_NAMESPACE = "Leasehold";

/** Powertools `serviceName`; becomes the `service` dimension's value. */
export const SERVICE_NAME = "leasehold";

export const Metric = {
  /**
   * Jobs that became `dead`, whichever path killed them (last attempt failed
   * or timed out, permanent failure, expired lease). Unit: Count.
   */
  DeadJobs: "DeadJobs",
  /** The same deaths, per queue (not alarmed: for the dashboard). Unit: Count. */
  JobsDead: "JobsDead",
  /** Jobs re-queued by the rescuer after an expired lease. Unit: Count. */
  RescuedJobs: "RescuedJobs",
  /** Age of the oldest claimable `queued` job, per queue. Unit: Seconds. */
  OldestReadyAgeSeconds: "OldestReadyAgeSeconds",
  /** Claimable `queued` jobs, per queue. Unit: Count. */
  ReadyJobs: "ReadyJobs",
  JobsSucceeded: "JobsSucceeded",
  JobsFailed: "JobsFailed",
  JobsTimedOut: "JobsTimedOut",
  /** Settles refused because the lease token no longer matched. Unit: Count. */
  StaleSettles: "StaleSettles",
  /**
   * Ready jobs no runner can claim (queue not served, type unknown to the
   * deployed runners, lease too long), all queues together. Unit: Count.
   */
  UnservedJobs: "UnservedJobs",
  /** The same, per queue (not alarmed: for the dashboard). Unit: Count. */
  JobsUnserved: "JobsUnserved",
  /** Asynchronous Invokes of a function that Lambda accepted, by the scheduler. Unit: Count. */
  InvokesAccepted: "InvokesAccepted",
  /**
   * Invokes of a function that failed (throttled, not found, reset, refused,
   * no answer), by the scheduler; each is retried with backoff. Unit: Count.
   */
  InvokeFailures: "InvokeFailures",
  /**
   * Scheduler invocations that ended with work due and could neither hand
   * over to a successor nor arm an `at()` schedule: nothing watches the queue
   * until the next enqueue, runner failure or the daily cron. Unit: Count.
   */
  WatchLost: "WatchLost",
} as const;
export type MetricName = (typeof Metric)[keyof typeof Metric];

/** Dimension *names* as published (values: SERVICE_NAME, the queue name). */
export const Dimension = {
  Service: "service",
  Queue: "queue",
  Function: "function",
} as const;
export type DimensionName = (typeof Dimension)[keyof typeof Dimension];

/** The exact dimension set each metric is published with. */
export const METRIC_DIMENSIONS: Record<MetricName, readonly DimensionName[]> = {
  DeadJobs: [Dimension.Service],
  RescuedJobs: [Dimension.Service],
  StaleSettles: [Dimension.Service],
  UnservedJobs: [Dimension.Service],
  JobsUnserved: [Dimension.Service, Dimension.Queue],
  ReadyJobs: [Dimension.Service, Dimension.Queue],
  OldestReadyAgeSeconds: [Dimension.Service, Dimension.Queue],
  JobsSucceeded: [Dimension.Service, Dimension.Queue],
  JobsFailed: [Dimension.Service, Dimension.Queue],
  JobsTimedOut: [Dimension.Service, Dimension.Queue],
  JobsDead: [Dimension.Service, Dimension.Queue],
  InvokesAccepted: [Dimension.Service, Dimension.Function],
  InvokeFailures: [Dimension.Service, Dimension.Function],
  WatchLost: [Dimension.Service],
};

/** The dimensions (names and values) of `metric`, for `value` (a queue, a function) when it has a second one. */
export function metricDimensions(metric: MetricName, value?: string): Record<string, string> {
  const dims: Record<string, string> = {};
  for (const name of METRIC_DIMENSIONS[metric]) {
    if (name === Dimension.Service) dims[name] = SERVICE_NAME;
    else if (value === undefined) throw new Error(`metric ${metric} needs a ${name} dimension`);
    else dims[name] = value;
  }
  return dims;
}
