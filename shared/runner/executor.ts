import type { z } from "zod";
import type { ClaimedJob } from "../claim.ts";
import type { JobContext, JobType } from "../job.ts";
import type { Clock } from "./clock.ts";

/** How one run of a handler ended. */
export type Outcome =
  | { outcome: "succeeded" }
  | { outcome: "failed" | "timeout"; error: string; permanent: boolean };

/** The most a handler's signal fires before its lease deadline. */
export const MAX_SETTLE_MARGIN_MS = 2_000;

/**
 * How long before its lease deadline a handler is aborted, so that its
 * outcome is written as `timeout` while the lease still holds (invariant 7):
 * a quarter of the lease, at most `MAX_SETTLE_MARGIN_MS`.
 */
export function settleMarginMs(leaseMs: number): number {
  return Math.min(MAX_SETTLE_MARGIN_MS, Math.floor(leaseMs / 4));
}

/** A handler failed this job for good: it ends `dead` now, with no retry. */
export function isPermanent(err: unknown): boolean {
  return err instanceof Error && err.name === "PermanentError";
}

/** An error as text Postgres can store: its stack, no NUL, no lone surrogate. */
export function errorText(err: unknown): string {
  const text = err instanceof Error ? (err.stack ?? `${err.name}: ${err.message}`) : String(err);
  return text.replace(/\u0000/g, "\\0").toWellFormed().slice(0, 16_384);
}

export interface ExecuteArgs {
  job: ClaimedJob;
  type: JobType;
  /** Local time the lease runs out. */
  deadline: number;
  clock: Clock;
  context: Pick<JobContext, "runnerId" | "enqueue">;
}

/**
 * Runs exactly one job: its payload checked by its schema, its handler
 * under an AbortSignal that fires `settleMarginMs` before the lease
 * deadline, a throw turned into a failure. A payload that no longer fits the
 * schema, or a `PermanentError`, fails the job for good. Knows nothing of
 * batches or slots.
 */
export async function executeJob({ job, type, deadline, clock, context }: ExecuteArgs): Promise<Outcome> {
  const parsed = (type.schema as z.ZodType).safeParse(job.payload);
  if (!parsed.success) {
    return { outcome: "failed", permanent: true, error: `payload does not match the schema of ${job.name}: ${parsed.error.message}` };
  }
  const controller = new AbortController();
  const abortAt = deadline - settleMarginMs(job.leaseMs);
  let cancel = () => {};
  const timedOut = new Promise<"timeout">((resolve) => {
    cancel = clock.after(abortAt - clock.now(), () => {
      controller.abort(new Error(`lease of ${job.leaseMs}ms about to expire`));
      resolve("timeout");
    });
  });
  const ctx: JobContext = {
    ...context,
    jobId: job.id, attempt: job.attempts, maxAttempts: job.maxAttempts, leaseToken: job.leaseToken,
    signal: controller.signal,
  };
  try {
    const result = await Promise.race([Promise.resolve().then(() => type.handler(parsed.data, ctx)), timedOut]);
    if (result === "timeout" || controller.signal.aborted) {
      return { outcome: "timeout", permanent: false, error: `timeout: handler ran past ${job.leaseMs - settleMarginMs(job.leaseMs)}ms of its ${job.leaseMs}ms lease` };
    }
    return { outcome: "succeeded" };
  } catch (err) {
    if (controller.signal.aborted) {
      return { outcome: "timeout", permanent: false, error: `timeout: ${errorText(err)}` };
    }
    return { outcome: "failed", permanent: isPermanent(err), error: errorText(err) };
  } finally {
    cancel();
  }
}
