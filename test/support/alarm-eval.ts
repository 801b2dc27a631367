import type { AlarmSpec } from "../../infra/alarm-specs.ts";

/** An EMF document as Powertools Metrics prints it. */
export interface EmfDoc {
  _aws: { Timestamp: number; CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[] };
  [key: string]: unknown;
}

/**
 * CloudWatch's evaluation of a metric alarm, over the EMF documents the
 * functions printed: only documents whose namespace, metric and complete
 * dimension set match the alarm's count (CloudWatch matches exactly); values
 * are aggregated per period (its statistic) on the clock's period
 * boundaries; the alarm is in ALARM at a period when each of its last
 * `evaluationPeriods` periods breaches (a period without data does not:
 * `notBreaching`). Returns the state at each period that has data.
 */
export function alarmStates(spec: AlarmSpec, docs: readonly EmfDoc[]): { periodStartMs: number; value: number; state: "ALARM" | "OK" }[] {
  const periodMs = spec.period * 1000;
  const keys = Object.keys(spec.dimensions).sort();
  const values = new Map<number, number[]>();
  for (const doc of docs) {
    const matches = doc._aws.CloudWatchMetrics.some((d) =>
      d.Namespace === spec.namespace && d.Metrics.some((m) => m.Name === spec.metricName) &&
      d.Dimensions.some((set) => [...set].sort().join() === keys.join()));
    if (!matches || !Object.entries(spec.dimensions).every(([k, v]) => doc[k] === v)) continue;
    const value = doc[spec.metricName];
    if (typeof value !== "number") continue;
    const start = Math.floor(doc._aws.Timestamp / periodMs) * periodMs;
    values.set(start, [...(values.get(start) ?? []), value]);
  }
  const aggregate = (xs: number[]) => (spec.statistic === "Sum" ? xs.reduce((a, b) => a + b, 0) : Math.max(...xs));
  const breaching = (start: number) => {
    const xs = values.get(start);
    return xs !== undefined && aggregate(xs) > spec.threshold;
  };
  return [...values.keys()].sort((a, b) => a - b).map((start) => ({
    periodStartMs: start,
    value: aggregate(values.get(start)!),
    state: Array.from({ length: spec.evaluationPeriods }, (_, i) => start - i * periodMs).every(breaching) ? "ALARM" : "OK",
  }));
}
