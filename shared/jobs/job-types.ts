/**
 * The shapes of a job type, its options and what its handler gets: types
 * only, so the modules that check them (validate.ts, concurrency.ts,
 * flow-control.ts) import them without importing job.ts, which imports them.
 */
import type { z } from "zod";
import type { OwnRateLimit, RateLimit } from "./rate-limit.ts";

/**
 * A job's status. The whole lifecycle, and who moves a job in and out:
 * - `queued`: waiting; claimable once `run_at` has come. In by enqueue, by a
 *   retry after a failed attempt (later `run_at`), by the rescuer after an
 *   expired lease, by a manual retry of a dead job, by a handler's sleep
 *   (`ctx.sleep`, its wake time as run_at). Out by a runner's claim,
 *   or by cancel.
 * - `running`: held by one runner under a lease (token + expiry). Out by that
 *   runner (succeeded; failed or timed out -> queued or dead; released or
 *   slept -> queued) or by the rescuer once the lease has expired.
 * - `succeeded`, `dead`, `cancelled`: terminal. `dead` means every attempt
 *   was used; the attempt rows say why each one ended. A manual retry moves a
 *   dead job back to `queued` with fresh attempts.
 */
export type JobStatus = "queued" | "running" | "succeeded" | "dead" | "cancelled";

/** How one attempt ended; one `job_attempts` row per attempt. */
/** `slept`: the handler called `ctx.sleep`; the attempt was given back and the job waits for its time. */
export type AttemptOutcome = "succeeded" | "failed" | "timeout" | "lease_expired" | "released" | "slept";

/** What a handler gets beside its payload. */
export interface JobContext {
  jobId: string;
  /**
   * The attempt this run is charged as: 1 on the first, at most
   * `maxAttempts` (what `maxAttempts` bounds and the backoff counts). A run
   * given back uncharged (released from a runner's buffer, or a death with no
   * start on record) does not raise it, and a manual retry of a dead job
   * starts again at 1. The job's `attempts` is the same count.
   */
  attempt: number;
  /**
   * The number of the attempt row this run writes (`run` in the CLI, the
   * API and the dashboard): 1 on the first run, raised by every claim, never
   * given back, so it is unique for the life of the job across releases and
   * manual retries, and can exceed `maxAttempts`.
   */
  run: number;
  maxAttempts: number;
  leaseToken: string;
  /** Fires at the lease deadline; the attempt is then recorded `timeout`. */
  signal: AbortSignal;
  /** The runner holding the lease (the Lambda request id on Lambda). */
  runnerId: string;
  /** Enqueues a follow-up job; a runner serving its queue picks it up at once. */
  enqueue: <S extends z.ZodType>(type: JobType<S>, payload: z.input<S>, options?: EnqueueOptions) => Promise<EnqueuedJob>;
  /**
   * A durable step: runs `fn` and records its JSON result, fenced by the
   * lease, before resolving. A later attempt of this job (a retry, a rescue,
   * a wake after a sleep) replays a recorded step's result instead of
   * running it again; only a step whose runner died before its record was
   * written runs again. Names are unique per run, in the same order every run.
   */
  step: <T>(name: string, fn: () => Promise<T> | T) => Promise<T>;
  /**
   * Ends this attempt without charging it and puts the job back in the queue
   * for `ms` from now; no runner is held while it sleeps. The handler runs
   * again from the top then, replaying its recorded steps (the sleep is one).
   * Await it alone: nothing after it runs in this attempt.
   */
  sleep: (ms: number) => Promise<void>;
  /** As `sleep`, until `at`. */
  sleepUntil: (at: Date) => Promise<void>;
}

export interface JobDefaults {
  queue: string;
  maxAttempts: number;
  leaseMs: number;
  /** Base of the exponential retry backoff. */
  backoffMs: number;
  /** Higher runs first. */
  priority: number;
}

/**
 * At most `limit` jobs with the same key run at once, across every runner.
 * The key is `key(payload)`, else the job's group; a job with neither has no
 * limit. Jobs of any type that share a key share its slots, each held to its
 * own type's limit. A limit of 1 runs a key's jobs one at a time.
 */
export interface ConcurrencyLimit<P = unknown> {
  limit: number;
  key?: (payload: P) => string | null | undefined;
}

/**
 * Debounce on enqueue: one job per key that no runner has claimed yet. An
 * enqueue that finds one updates it to its own payload and options and
 * moves its start to `periodMs` after this enqueue, never later than
 * `maxWaitMs` after the job's first enqueue (default
 * `DEFAULT_DEBOUNCE_MAX_WAIT_PERIODS` periods), so a steady stream still
 * runs. Once claimed, the job no longer counts: the next enqueue starts a
 * new one. On a job type, `key` may be a function of the payload (null: not
 * debounced); keys are per job type.
 */
export interface Debounce<P = unknown> {
  key: string | ((payload: P) => string | null | undefined);
  periodMs: number;
  maxWaitMs?: number;
}

/**
 * Throttle on enqueue: the first job of a key stands for `periodMs` from its
 * enqueue; every other enqueue of the key in that window returns it and
 * writes nothing. Keys are per job type.
 */
export interface Throttle<P = unknown> {
  key: string | ((payload: P) => string | null | undefined);
  periodMs: number;
}

export interface JobType<S extends z.ZodType = z.ZodType> extends JobDefaults {
  name: string;
  schema: S;
  handler: (payload: z.output<S>, ctx: JobContext) => Promise<unknown> | unknown;
  concurrency?: ConcurrencyLimit<z.output<S>>;
  /**
   * False: this type's jobs are claimed in the ungrouped share whatever their
   * group (their group still names them, and still keys their limit).
   * Default true: each group gets its turn.
   */
  fair?: boolean;
  /** Every enqueue of this type is debounced by its key, unless the enqueue gives its own. */
  debounce?: Debounce<z.output<S>>;
  /** Every enqueue of this type is throttled by its key, unless the enqueue gives its own. */
  throttle?: Throttle<z.output<S>>;
  /** At most `limit` of its jobs per key start in any `periodMs` (see `RateLimit`). */
  rateLimit?: RateLimit<z.output<S>>;
}

export interface EnqueueOptions {
  queue?: string;
  /** When to run; default now. */
  runAt?: Date;
  /** Run after this long; ignored when `runAt` is given. */
  delayMs?: number;
  priority?: number;
  maxAttempts?: number;
  /** An equal key while a job with it is pending returns that job instead. */
  dedupeKey?: string;
  /**
   * Tenant or other group this job belongs to. A claim shares a runner's
   * slots between the groups with ready jobs, in turn.
   */
  group?: string;
  /**
   * Debounce by `key` (see `Debounce`), replacing the job type's debounce or
   * throttle. Not with `runAt`, `delayMs`, `dedupeKey` or `throttle`.
   */
  debounce?: { key: string; periodMs: number; maxWaitMs?: number };
  /** Throttle by `key` (see `Throttle`), replacing the job type's debounce or throttle. Not with `dedupeKey`. */
  throttle?: { key: string; periodMs: number };
  /**
   * This job's rate limit key (and limit or period), replacing its type's.
   * Only for a type that declares a `rateLimit`.
   */
  rateLimit?: OwnRateLimit;
}

export interface EnqueuedJob {
  id: string;
  /**
   * True when a job already there was returned instead of a new one: a
   * pending job with the same dedupe key, a debounced job (then `debounced`),
   * or the job standing in a throttle window (then `throttled`).
   */
  existing: boolean;
  /** Present and true when an unclaimed job with the same debounce key took this enqueue's payload and start. */
  debounced?: boolean;
  /** Present and true when the job standing in the key's throttle window was returned; nothing was written. */
  throttled?: boolean;
}

/** The job types a runner or API knows, by name. */
export type Registry = ReadonlyMap<string, JobType>;
