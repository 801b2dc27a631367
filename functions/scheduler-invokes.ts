import type { LambdaClient } from "@aws-sdk/client-lambda";
import { classifyInvokeError, type InvokeBackoff } from "../shared/scheduler/invoke-backoff.ts";
import { Dimension, Metric, type MetricName } from "../shared/observe/metrics-names.ts";
import { invokeAsync } from "./aws.ts";
import { logger, MetricUnit, serviceMetrics } from "./observability.ts";

/**
 * The scheduler's Invokes (runners, its successor, the rescuer), each asked
 * only when the backoff allows, its failure recorded there, and counted per
 * function (by its name in the config): accepted apart from failed, in the
 * invocation's summary and as InvokesAccepted / InvokeFailures.
 */
export interface SchedulerInvokes {
  /** Whether `fn` may be invoked now. */
  may(fn: string): boolean;
  /** When `fn` may be invoked again. */
  retryAtMs(fn: string): number;
  /** Invokes `fn` (deployed as `target`) asynchronously; records and rethrows a failure. */
  invoke(fn: string, target: string, payload: unknown, timeoutMs: number): Promise<void>;
  /** The same, as a boolean; false without asking Lambda while `fn` backs off. */
  tryInvoke(fn: string, target: string, payload: unknown, timeoutMs: number): Promise<boolean>;
  /** This invocation's counts so far. */
  totals(): { accepted: number; failed: number };
  /** Publishes the counts since the last publish, one flush per function. */
  publish(): void;
}

export function schedulerInvokes(lambda: LambdaClient, backoff: InvokeBackoff): SchedulerInvokes {
  const pending = new Map<string, { accepted: number; failed: number }>();
  const totals = { accepted: 0, failed: 0 };
  const count = (fn: string, key: "accepted" | "failed") => {
    const c = pending.get(fn) ?? { accepted: 0, failed: 0 };
    c[key] += 1;
    totals[key] += 1;
    pending.set(fn, c);
  };
  const invoke = async (fn: string, target: string, payload: unknown, timeoutMs: number) => {
    try {
      await invokeAsync(lambda, target, payload, timeoutMs);
    } catch (err) {
      const failure = classifyInvokeError(err);
      const retryInMs = backoff.failed(fn, failure);
      count(fn, "failed");
      logger.warn("invoke failed", { function: fn, failure, failures: backoff.failures(fn), retryInMs, error: String(err) });
      throw err;
    }
    backoff.succeeded(fn);
    count(fn, "accepted");
  };
  return {
    may: (fn) => backoff.may(fn),
    retryAtMs: (fn) => backoff.retryAtMs(fn),
    invoke,
    async tryInvoke(fn, target, payload, timeoutMs) {
      if (!backoff.may(fn)) return false;
      return invoke(fn, target, payload, timeoutMs).then(() => true, () => false);
    },
    totals: () => ({ ...totals }),
    publish() {
      for (const [fn, c] of pending) {
        const m = serviceMetrics();
        m.addDimension(Dimension.Function, fn);
        const values: [MetricName, number][] = [[Metric.InvokesAccepted, c.accepted], [Metric.InvokeFailures, c.failed]];
        for (const [name, value] of values) m.addMetric(name, MetricUnit.Count, value);
        m.publishStoredMetrics();
      }
      pending.clear();
    },
  };
}

/** Counts a scheduler that ended with work due and nothing to watch it (alarmed). */
export function reportWatchLost(fields: Record<string, unknown>): void {
  logger.error("queue left unwatched: no successor and no at() schedule", fields);
  const m = serviceMetrics();
  m.addMetric(Metric.WatchLost, MetricUnit.Count, 1);
  m.publishStoredMetrics();
}
