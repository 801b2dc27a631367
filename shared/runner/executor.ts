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
  /**
   * `onMark` is called once the handler has run `markAfterMs`, unless it
   * ended first (the runner's start mark). It shares the run's one timer
   * with the deadline: a job that ends sooner has set a single timer.
   */
  markAfterMs?: number;
  onMark?: () => void;
}

/**
 * Runs exactly one job: its payload checked by its schema, its handler
 * under an AbortSignal that fires `settleMarginMs` before the lease
 * deadline, a throw turned into a failure. A payload that no longer fits the
 * schema, or a `PermanentError`, fails the job for good. Knows nothing of
 * batches or slots.
 */
export function executeJob(args: ExecuteArgs): Promise<Outcome> {
  const parsed = (args.type.schema as z.ZodType).safeParse(args.job.payload);
  if (!parsed.success) {
    return Promise.resolve({ outcome: "failed", permanent: true, error: `payload does not match the schema of ${args.job.name}: ${parsed.error.message}` });
  }
  return new Promise<Outcome>((resolve) => new Run(args, resolve).start(parsed.data));
}

/**
 * One run of a handler, and the context it is given. This runs once per job,
 * so it is one object with its methods on the prototype: the handler's
 * `step`, `sleep` and `sleepUntil` (made on first use, bound, so a handler may
 * destructure them), the AbortController (made when the handler reads
 * `ctx.signal`; read after the deadline, it comes already aborted) and the
 * step log (made on the first step or sleep) cost nothing to a job that does
 * not use them. Beside it: one timer, and the promise it resolves. The
 * deadline ends the run whether or not the handler listens.
 */
class Run implements JobContext {
  readonly jobId: string;
  readonly attempt: number;
  readonly run: number;
  readonly maxAttempts: number;
  readonly leaseToken: string;
  readonly runnerId: string;
  readonly enqueue: JobContext["enqueue"];
  #done = false;
  #expired = false;
  #controller: AbortController | undefined;
  #steps: StepRun | undefined;
  #cancel: (() => void) | undefined;
  #expireAt = 0;
  #marking = false;
  #step: JobContext["step"] | undefined;
  #sleep: JobContext["sleep"] | undefined;
  #sleepUntil: JobContext["sleepUntil"] | undefined;

  constructor(private readonly a: ExecuteArgs, private readonly resolve: (outcome: Outcome) => void) {
    const { job, context } = a;
    this.jobId = job.id;
    this.attempt = job.attempts;
    this.run = job.run;
    this.maxAttempts = job.maxAttempts;
    this.leaseToken = job.leaseToken;
    this.runnerId = context.runnerId;
    this.enqueue = context.enqueue;
  }

  start(payload: unknown): void {
    const { job, deadline, clock, markAfterMs, onMark } = this.a;
    this.#expireAt = deadline - settleMarginMs(job.leaseMs);
    // The start mark first, if one is owed before the deadline, then the deadline: one timer at a time.
    this.#marking = onMark !== undefined && markAfterMs !== undefined && clock.now() + markAfterMs < this.#expireAt;
    this.#cancel = clock.after(this.#marking ? markAfterMs! : this.#expireAt - clock.now(), this.#tick);
    void this.invoke(payload);
  }

  /** The run's timer: the start mark (then the deadline's timer), or the deadline. */
  readonly #tick = () => {
    if (!this.#marking) return this.expire();
    this.#marking = false;
    this.#cancel = this.a.clock.after(this.#expireAt - this.a.clock.now(), this.#tick);
    this.a.onMark!();
  };

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#expired) this.#controller.abort(this.abortReason());
    }
    return this.#controller.signal;
  }

  get step(): JobContext["step"] {
    return (this.#step ??= (name, fn) => this.steps().step(name, fn));
  }

  get sleep(): JobContext["sleep"] {
    return (this.#sleep ??= (ms) => {
      if (!Number.isFinite(ms) || ms < 0) return Promise.reject(new TypeError(`ctx.sleep needs a finite number of ms >= 0, got ${ms}`));
      return this.steps().sleepUntil(new Date(this.a.clock.now() + ms));
    });
  }

  get sleepUntil(): JobContext["sleepUntil"] {
    return (this.#sleepUntil ??= (at) => this.steps().sleepUntil(at));
  }

  private async invoke(payload: unknown): Promise<void> {
    // The handler runs in a later microtask, after the deadline's timer is set.
    await undefined;
    try {
      this.finish(resultOutcome(await this.a.type.handler(payload, this), this.a.maxResultBytes));
    } catch (err) {
      this.finish({ outcome: "failed", permanent: isPermanent(err), error: errorText(err) });
    }
  }

  private expire(): void {
    this.#expired = true;
    this.#controller?.abort(this.abortReason());
    const { leaseMs } = this.a.job;
    const marginMs = settleMarginMs(leaseMs);
    this.finish({ outcome: "timeout", permanent: false, error: `timeout: handler ran past ${leaseMs - marginMs}ms of its ${leaseMs}ms lease` });
  }

  private finish(outcome: Outcome): void {
    if (this.#done) return;
    this.#done = true;
    this.#cancel?.();
    this.resolve(this.#steps ? withSteps(outcome, this.#steps) : outcome);
  }

  private abortReason(): Error {
    return new Error(`lease of ${this.a.job.leaseMs}ms about to expire`);
  }

  private steps(): StepRun {
    const { store, job, clock, deadline, maxResultBytes, recordStep } = this.a;
    if (!store) throw new Error("ctx.step and ctx.sleep need the runner's store");
    const abortAt = deadline - settleMarginMs(job.leaseMs);
    return (this.#steps ??= new StepRun(store, job, clock, (runAt) => this.finish({ outcome: "slept", runAt }), maxResultBytes, abortAt, recordStep));
  }
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
