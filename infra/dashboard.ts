/**
 * One CloudWatch dashboard: queue depth and age, throughput, failures, dead
 * jobs, unserved jobs, runner concurrency, and the scheduler's Invokes. Metric names and dimensions come from
 * shared/observe/metrics-names.ts, the same constants the functions publish with.
 */
import { Metric, METRICS_NAMESPACE, metricDimensions, type MetricName } from "../shared/observe/metrics-names.ts";
import { configuredQueues, invokedFunctions, LAMBDA_NAMESPACE } from "./alarm-specs.ts";
import type { InfraContext } from "./context.ts";

type Stat = "Sum" | "Maximum" | "Average";
type MetricLine = $util.Input<string | number | Record<string, unknown>>[];

export function createDashboard(ctx: InfraContext, runners: Record<string, sst.aws.Function>): aws.cloudwatch.Dashboard {
  const { config } = ctx;
  const region = aws.getRegionOutput().region;
  const queues = configuredQueues(config);

  /** A Leasehold metric as a dashboard line: [namespace, name, dim, value, ..., options]. */
  function leasehold(metric: MetricName, stat: Stat, dimension?: string): MetricLine {
    const dims = Object.entries(metricDimensions(metric, dimension)).flat();
    return [METRICS_NAMESPACE, metric, ...dims, { stat, label: dimension ? `${metric} ${dimension}` : metric }];
  }

  function perQueue(metric: MetricName, stat: Stat): MetricLine[] {
    return queues.map((queue) => leasehold(metric, stat, queue));
  }

  function perRunner(metric: string, stat: Stat): MetricLine[] {
    return Object.entries(runners).map(([name, fn]) => [
      LAMBDA_NAMESPACE, metric, "FunctionName", fn.name, { stat, label: `${metric} ${name}` },
    ]);
  }

  function widget(title: string, metrics: MetricLine[], extra: Record<string, unknown> = {}) {
    return {
      type: "metric",
      width: 12,
      height: 6,
      properties: { title, region, metrics, period: 60, view: "timeSeries", stacked: false, ...extra },
    };
  }

  const widgets = [
    widget("Queue depth (ready jobs)", perQueue(Metric.ReadyJobs, "Maximum")),
    widget("Oldest ready job (seconds)", perQueue(Metric.OldestReadyAgeSeconds, "Maximum"), {
      annotations: { horizontal: [{ label: "alarm", value: config.alarms.oldestReadyAgeSeconds }] },
    }),
    widget("Throughput (jobs succeeded / min)", perQueue(Metric.JobsSucceeded, "Sum")),
    widget("Failures (per min)", [
      ...perQueue(Metric.JobsFailed, "Sum"),
      ...perQueue(Metric.JobsTimedOut, "Sum"),
      leasehold(Metric.StaleSettles, "Sum"),
      ...perRunner("Errors", "Sum"),
    ]),
    widget("Dead and rescued jobs", [
      leasehold(Metric.DeadJobs, "Sum"),
      ...perQueue(Metric.JobsDead, "Sum"),
      leasehold(Metric.RescuedJobs, "Sum"),
    ]),
    widget("Unserved jobs (ready, no runner can claim them)", [
      leasehold(Metric.UnservedJobs, "Maximum"),
      ...perQueue(Metric.JobsUnserved, "Maximum"),
    ]),
    widget("Runner concurrency", [...perRunner("ConcurrentExecutions", "Maximum"), ...perRunner("Throttles", "Sum")]),
    widget("Scheduler Invokes (accepted, failed)", [
      ...invokedFunctions(config).flatMap((fn) => [leasehold(Metric.InvokesAccepted, "Sum", fn), leasehold(Metric.InvokeFailures, "Sum", fn)]),
      leasehold(Metric.WatchLost, "Sum"),
    ]),
  ];

  return new aws.cloudwatch.Dashboard(ctx.child("Dashboard"), {
    dashboardName: `${$app.name}-${$app.stage}${ctx.child("") ? `-${ctx.child("")}` : ""}`,
    dashboardBody: $jsonStringify({ widgets }),
  });
}
