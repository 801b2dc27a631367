import type { z } from "zod";
import type { ClaimedJob } from "../lifecycle/claim.ts";
import type { JobContext, JobType } from "../jobs/job.ts";
import { DEFAULT_MAX_PAYLOAD_BYTES, payloadJson } from "../jobs/payload.ts";
import type { Store } from "../db/db.ts";
import type { Clock } from "./clock.ts";
import { StepRun, type RecordStep } from "./steps.ts";

/**
 * How one run of a handler ended: with its result (JSON, absent when it
 * returned nothing), its step log (JSON, absent when it used no steps), or
 * asleep until `runAt`.
 */
export type Outcome =
  | { outcome: "succeeded"; result?: string | null; steps?: string | null }
  | { outcome: "failed" | "timeout"; error: string; permanent: boolean; steps?: string | null }
  | { outcome: "slept"; runAt: Date; steps?: string | null };

const SUCCEEDED: Outcome = Object.freeze({ outcome: "succeeded" });

/**
 * A handler's return value as the JSON its job keeps, or a permanent failure
 * when JSON cannot keep it exactly or it is larger than a payload may be: a
 * handler that returns nothing keeps no result.
 */
export function resultOutcome(value: unknown, maxBytes = DEFAULT_MAX_PAYLOAD_BYTES): Outcome {
  if (value === undefined) return SUCCEEDED;
  const json = payloadJson(value, ["result"], maxBytes);
  if ("json" in json) return { outcome: "succeeded", result: json.json };
  const issues = json.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
  return { outcome: "failed", permanent: true, error: `the handler's return value cannot be kept as the job's result: ${issues}` };
}

/** The most a handler's signal fires before its lease deadline. */
export const MAX_SETTLE_MARGIN_MS = 2_000;
/**
 * The least: a timeout write under faults (a cut connection retried, a
 * silent one abandoned at its write deadline) and some event-loop lag must
 * fit in it (docs/internals.md, "Known limits, measured").
 */
export const MIN_SETTLE_MARGIN_MS = 400;

/**
 * How long before its lease deadline a handler is aborted, so that its
 * outcome is written as `timeout` while the lease still holds (invariant 7):
 * a quarter of the lease, at least `MIN_SETTLE_MARGIN_MS` (never more than
 * half the lease), at most `MAX_SETTLE_MARGIN_MS`.
 */
export function settleMarginMs(leaseMs: number): number {
  return Math.min(MAX_SETTLE_MARGIN_MS, Math.max(Math.min(MIN_SETTLE_MARGIN_MS, Math.floor(leaseMs / 2)), Math.floor(leaseMs / 4)));
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
  /** Most bytes of JSON the handler's return value may take; default `DEFAULT_MAX_PAYLOAD_BYTES`. */
  maxResultBytes?: number;
  /** Where `ctx.step` records its results; without it, `ctx.step` and `ctx.sleep` throw. */
  store?: Store;
  /**
   * Writes step records in order with this attempt's settle (the runner's
   * completer), so each shares a round trip with other writes; without it,
   * each record is written on its own.
   */
  recordStep?: RecordStep;
}

/**
 * Runs exactly one job: its payload checked by its schema, its handler
 * under an AbortSignal that fires `settleMarginMs` before the lease
 * deadline, a throw turned into a failure. A payload that no longer fits the
 * schema, or a `PermanentError`, fails the job for good. Knows nothing of
 * batches or slots.
 *
 * This runs once per job, so it allocates little: one promise, one timer,
 * and the AbortController only when the handler reads `ctx.signal` (a signal
 * read after the deadline comes already aborted). The deadline ends the run
 * whether or not the handler listens.
 */
export function executeJob({ job, type, deadline, clock, context, maxResultBytes, store, recordStep }: ExecuteArgs): Promise<Outcome> {
  const parsed = (type.schema as z.ZodType).safeParse(job.payload);
  if (!parsed.success) {
    return Promise.resolve({ outcome: "failed", permanent: true, error: `payload does not match the schema of ${job.name}: ${parsed.error.message}` });
  }
  let controller: AbortController | undefined;
  let expired = false;
  const abortReason = () => new Error(`lease of ${job.leaseMs}ms about to expire`);
  // Made on the first step or sleep: a job without steps pays nothing for them.
  let steps: StepRun | undefined;
  let finish: (outcome: Outcome) => void = () => {};
  const stepRun = () => {
    if (!store) throw new Error("ctx.step and ctx.sleep need the runner's store");
    const abortAt = deadline - settleMarginMs(job.leaseMs);
    return (steps ??= new StepRun(store, job, clock, (runAt) => finish({ outcome: "slept", runAt }), maxResultBytes, abortAt, recordStep));
  };
  const ctx: JobContext = {
    runnerId: context.runnerId, enqueue: context.enqueue,
    step: (name, fn) => stepRun().step(name, fn),
    sleep: (ms) => {
      if (!Number.isFinite(ms) || ms < 0) return Promise.reject(new TypeError(`ctx.sleep needs a finite number of ms >= 0, got ${ms}`));
      return stepRun().sleepUntil(new Date(clock.now() + ms));
    },
    sleepUntil: (at) => stepRun().sleepUntil(at),
    jobId: job.id, attempt: job.attempts, run: job.run, maxAttempts: job.maxAttempts, leaseToken: job.leaseToken,
    get signal() {
      if (!controller) {
        controller = new AbortController();
        if (expired) controller.abort(abortReason());
      }
      return controller.signal;
    },
  };
  return new Promise<Outcome>((resolve) => {
    let done = false;
    let cancel = () => {};
    finish = (outcome: Outcome) => {
      if (done) return;
      done = true;
      cancel();
      resolve(steps ? withSteps(outcome, steps) : outcome);
    };
    const marginMs = settleMarginMs(job.leaseMs);
    cancel = clock.after(deadline - marginMs - clock.now(), () => {
      expired = true;
      controller?.abort(abortReason());
      finish({ outcome: "timeout", permanent: false, error: `timeout: handler ran past ${job.leaseMs - marginMs}ms of its ${job.leaseMs}ms lease` });
    });
    Promise.resolve()
      .then(() => type.handler(parsed.data, ctx))
      .then(
        (value: unknown) => finish(resultOutcome(value, maxResultBytes)),
        (err: unknown) => finish({ outcome: "failed", permanent: isPermanent(err), error: errorText(err) }),
      );
  });
}

/**
 * The outcome of a run that used steps: its step log added, a failure or
 * timeout naming the step it happened in, and a step-order error failing the
 * attempt even if the handler caught it.
 */
function withSteps(outcome: Outcome, steps: StepRun): Outcome {
  const log = steps.logJson();
  if (steps.broken && outcome.outcome !== "timeout") {
    return { outcome: "failed", permanent: false, error: errorText(steps.broken), steps: log };
  }
  if (outcome.outcome === "failed" || outcome.outcome === "timeout") {
    const step = steps.failedStep ?? steps.inFlight;
    return { ...outcome, error: step === null ? outcome.error : `in step "${step}": ${outcome.error}`, steps: log };
  }
  return { ...outcome, steps: log };
}
