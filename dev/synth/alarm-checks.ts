/**
 * The alarms and the dashboard of a synthesized stack, against the metrics
 * as the functions publish them (shared/observe/metrics-names.ts, the names and
 * dimensions functions/observability.ts and functions/scheduler-invokes.ts
 * publish with).
 */
import { readEnvironment } from "../../shared/settings/environment.ts";
import { Dimension, Metric, METRIC_DIMENSIONS, METRICS_NAMESPACE, metricDimensions, SERVICE_NAME, type MetricName } from "../../shared/observe/metrics-names.ts";
import { core } from "./checks.ts";
import type { Check, Graph } from "./graph.ts";

/** The functions the scheduler invokes, by their names in the config: what the `function` dimension holds. */
function invokedNames(g: Graph): string[] {
  const scheduler = g.kind("scheduler")[0];
  return [...Object.keys(scheduler ? readEnvironment(scheduler.env).runnerFunctions : {}), "scheduler", "rescuer"];
}


/** The alarms, against the metrics as the functions publish them (shared/observe/metrics-names.ts). */
export function alarmChecks(): Check[] {
  const alarms = (g: Graph) => g.all("aws:cloudwatch/metricAlarm:MetricAlarm");
  const wanted = (g: Graph): [string, MetricName, string | undefined][] => [
    ["DeadJobs", Metric.DeadJobs, undefined],
    ["UnservedJobs", Metric.UnservedJobs, undefined],
    ["WatchLost", Metric.WatchLost, undefined],
    ...invokedNames(g).map((fn): [string, MetricName, string] => [`InvokeFailures-${fn}`, Metric.InvokeFailures, fn]),
  ];
  return [
    {
      name: "the DeadJobs, UnservedJobs, InvokeFailures-<fn> and WatchLost alarms watch the metrics as published",
      run(g) {
        return wanted(g).flatMap(([name, metric, fn]) => {
          const alarm = alarms(g).find((a) => String(a.inputs.name).endsWith(`-${name}`));
          if (!alarm) return [`no ${name} alarm`];
          const dims = metricDimensions(metric, fn);
          const same = alarm.inputs.namespace === METRICS_NAMESPACE && alarm.inputs.metricName === metric && sameEntries(alarm.inputs.dimensions, dims);
          return same ? [] : [`${name}: watches ${alarm.inputs.namespace}/${alarm.inputs.metricName} ${JSON.stringify(alarm.inputs.dimensions)}, published as ${METRICS_NAMESPACE}/${metric} ${JSON.stringify(dims)}`];
        });
      },
    },
    {
      name: "every alarm watches a metric with the dimensions it is published with, and notifies the topic",
      run(g) {
        const problems: string[] = [];
        const { topicArn } = core(g, problems);
        const lambdas = new Set(g.functions().map((f) => f.functionName));
        for (const a of alarms(g)) {
          const dims = (a.inputs.dimensions ?? {}) as Record<string, string>;
          if (a.inputs.namespace === METRICS_NAMESPACE) {
            const names = METRIC_DIMENSIONS[a.inputs.metricName as MetricName];
            if (!names) problems.push(`${a.name}: no function publishes ${a.inputs.metricName}`);
            else if (JSON.stringify(Object.keys(dims).sort()) !== JSON.stringify([...names].sort()) || dims[Dimension.Service] !== SERVICE_NAME) {
              problems.push(`${a.name}: dimensions ${JSON.stringify(dims)}, published with ${names.join(", ")}`);
            }
          } else if (!lambdas.has(dims.FunctionName ?? "")) problems.push(`${a.name}: watches function ${dims.FunctionName}, not one of the stack`);
          for (const key of ["alarmActions", "okActions"]) {
            if (JSON.stringify(a.inputs[key]) !== JSON.stringify([topicArn])) problems.push(`${a.name}: ${key} ${JSON.stringify(a.inputs[key])}, not the topic`);
          }
        }
        return problems;
      },
    },
    {
      name: "the dashboard charts the published metrics of the stack's functions",
      run(g) {
        const dashboard = g.all("aws:cloudwatch/dashboard:Dashboard")[0];
        if (!dashboard) return ["no dashboard"];
        const lambdas = new Set(g.functions().map((f) => f.functionName));
        const body = JSON.parse(String(dashboard.inputs.dashboardBody)) as { widgets: { properties: { metrics: unknown[][] } }[] };
        return body.widgets.flatMap((w) => w.properties.metrics).flatMap((line) => {
          const dims = line.slice(2, -1).filter((_, i) => i % 2 === 0);
          if (line[0] === METRICS_NAMESPACE) {
            const names = METRIC_DIMENSIONS[line[1] as MetricName];
            return names && JSON.stringify(dims) === JSON.stringify(names) ? [] : [`dashboard line ${JSON.stringify(line)}: not as published`];
          }
          return lambdas.has(String(line[3])) ? [] : [`dashboard line ${JSON.stringify(line)}: no such function`];
        });
      },
    },
  ];
}

function sameEntries(a: Record<string, string> | undefined, b: Record<string, string>): boolean {
  const sorted = (o: Record<string, string>) => JSON.stringify(Object.entries(o).sort(([x], [y]) => x.localeCompare(y)));
  return sorted(a ?? {}) === sorted(b);
}

