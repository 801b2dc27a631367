/**
 * The alarms as plain data: `infra/alarms.ts` turns each spec into a
 * CloudWatch alarm, and tests compare the specs with the metrics the
 * functions really publish. No SST globals here.
 */
import { type Config } from "../shared/settings/config.ts";
import { runnerFunctions } from "../shared/settings/function-specs.ts";
import { Metric, METRICS_NAMESPACE, metricDimensions } from "../shared/observe/metrics-names.ts";

export const LAMBDA_NAMESPACE = "AWS/Lambda";

export interface AlarmSpec {
  /** Unique within the stage; infra prefixes it with app and stage. */
  name: string;
  description: string;
  namespace: string;
  metricName: string;
  /**
   * The complete dimension set of the watched metric. For `AWS/Lambda`
   * specs it is empty here and infra adds `FunctionName` (see `lambdaFunction`).
   */
  dimensions: Record<string, string>;
  threshold: number;
  comparison: "GreaterThanThreshold";
  /** Seconds. */
  period: number;
  evaluationPeriods: number;
  statistic: "Sum" | "Maximum";
  treatMissingData: "notBreaching";
  /** For AWS/Lambda metrics: the runner (config.runners key) whose function is watched. */
  lambdaFunction?: string;
}

/** Every queue some runner serves, in first-seen order. */
export function configuredQueues(cfg: Config): string[] {
  return [...new Set(Object.values(cfg.runners).flatMap((r) => r.queues))];
}

const base = {
  comparison: "GreaterThanThreshold",
  period: 60,
  evaluationPeriods: 1,
  treatMissingData: "notBreaching",
} as const;

export function alarmSpecs(cfg: Config): AlarmSpec[] {
  const specs: AlarmSpec[] = [
    {
      ...base,
      name: "DeadJobs",
      description: "A job became dead: its last attempt failed, timed out or lost its lease, or it failed for good. See docs/deploy.md, 'Dead jobs'.",
      namespace: METRICS_NAMESPACE,
      metricName: Metric.DeadJobs,
      dimensions: metricDimensions(Metric.DeadJobs),
      statistic: "Sum",
      threshold: cfg.alarms.deadJobsThreshold,
    },
    {
      ...base,
      name: "StaleSettles",
      description: "Runners tried to settle jobs whose lease they had lost (fencing refusals).",
      namespace: METRICS_NAMESPACE,
      metricName: Metric.StaleSettles,
      dimensions: metricDimensions(Metric.StaleSettles),
      statistic: "Sum",
      threshold: cfg.alarms.staleSettlesThreshold,
    },
    {
      ...base,
      name: "UnservedJobs",
      description:
        `Ready jobs no runner can claim (queue not served, job type not deployed, lease too long) for ${cfg.alarms.unservedMinutes} minutes in a row. ` +
        "See docs/deploy.md, 'Unserved jobs'.",
      namespace: METRICS_NAMESPACE,
      metricName: Metric.UnservedJobs,
      dimensions: metricDimensions(Metric.UnservedJobs),
      statistic: "Maximum",
      threshold: 0,
      evaluationPeriods: cfg.alarms.unservedMinutes,
    },
  ];
  for (const queue of configuredQueues(cfg)) {
    specs.push({
      ...base,
      name: `OldestReadyAge-${queue}`,
      description: `The oldest ready job on queue "${queue}" waited over ${cfg.alarms.oldestReadyAgeSeconds}s.`,
      namespace: METRICS_NAMESPACE,
      metricName: Metric.OldestReadyAgeSeconds,
      dimensions: metricDimensions(Metric.OldestReadyAgeSeconds, queue),
      statistic: "Maximum",
      threshold: cfg.alarms.oldestReadyAgeSeconds,
    });
  }
  specs.push(...invokeAlarmSpecs(cfg));
  for (const runner of Object.keys(cfg.runners)) {
    for (const metricName of ["Errors", "Throttles"] as const) {
      specs.push({
        ...base,
        name: `${runner}-${metricName}`,
        description: `Lambda ${metricName} of runner "${runner}" (errors include timeouts and out-of-memory deaths).`,
        namespace: LAMBDA_NAMESPACE,
        metricName,
        dimensions: {},
        statistic: "Sum",
        threshold: 0,
        lambdaFunction: runner,
      });
    }
  }
  return specs;
}

/** The functions the scheduler invokes, by their names in the config (the `function` dimension). */
export function invokedFunctions(cfg: Config): string[] {
  return [...runnerFunctions(cfg).map((f) => f.name), "scheduler", "rescuer"];
}

/** Sustained Invoke failures, one alarm per function the scheduler invokes; and a scheduler that left its queue unwatched. */
function invokeAlarmSpecs(cfg: Config): AlarmSpec[] {
  const minutes = cfg.alarms.invokeFailureMinutes;
  const specs: AlarmSpec[] = invokedFunctions(cfg).map((fn) => ({
    ...base,
    name: `InvokeFailures-${fn}`,
    description:
      `More than ${cfg.alarms.invokeFailureThreshold} of the scheduler's Invokes of "${fn}" failed within ${minutes} minutes ` +
      "(throttled, function not found, connection reset or refused, no answer). See docs/deploy.md, 'Invoke failures'.",
    namespace: METRICS_NAMESPACE,
    metricName: Metric.InvokeFailures,
    dimensions: metricDimensions(Metric.InvokeFailures, fn),
    statistic: "Sum",
    threshold: cfg.alarms.invokeFailureThreshold,
    period: 60 * minutes,
  }));
  specs.push({
    ...base,
    name: "WatchLost",
    description:
      "A scheduler ended with work due and could neither hand over to a successor nor arm an at() schedule: " +
      "nothing watches the queue until the next enqueue. See docs/deploy.md, 'Invoke failures'.",
    namespace: METRICS_NAMESPACE,
    metricName: Metric.WatchLost,
    dimensions: metricDimensions(Metric.WatchLost),
    statistic: "Sum",
    threshold: 0,
  });
  return specs;
}
