import { RUNNER_DEFAULTS } from "../settings/config.ts";
import type { Store } from "../db/db.ts";
import type { EnqueueLimits } from "../jobs/validate.ts";
import type { Registry } from "../jobs/job.ts";
import type { Clock } from "./clock.ts";
import type { Linger } from "./linger.ts";

/** What `runWorker` takes, tells and returns (shared/runner/worker.ts), and the defaults it takes from the config. */

export interface WorkerLog {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export interface WorkerOptions {
  store: Store;
  registry: Registry;
  /** Served in turn; a claim takes from one queue at a time. */
  queues: readonly string[];
  runnerId: string;
  /** Jobs run at once. */
  slots: number;
  /**
   * Jobs claimed ahead of the free slots. Default: adaptive (`PrefetchGauge`):
   * what the slots will finish while the next claim is under way; none for
   * slow jobs, so other runners can take them.
   */
  prefetch?: number;
  /** Time left before the runner must be gone; default: no limit. */
  remainingMs?: () => number;
  /** Kept back from `remainingMs` for settling and closing. */
  marginMs?: number;
  /** The longest lease it takes, however much time remains (its config's `maxLeaseMs`); default: no limit. */
  maxLeaseMs?: number;
  /** Default (the config's): share each claim between the groups with ready jobs; false: priority order only. */
  fair?: boolean;
  /**
   * Exit after this long with nothing to claim and nothing running (with
   * `linger: "adaptive"`, at most this long). Default: the config's.
   */
  idleMs?: number;
  /**
   * `adaptive` (default, as in the config): linger only as long as the
   * arrivals seen make another likely, one poll for an isolated job
   * (shared/runner/linger.ts). `fixed`: linger `idleMs`. A `Linger`
   * instance: adaptive, with the arrivals earlier runs saw too (one kept per
   * warm environment).
   */
  linger?: "fixed" | "adaptive" | Linger;
  /** Wait between claims that found nothing; default: the config's. */
  pollMs?: number;
  /**
   * Listen for enqueues while waiting for work, on one connection of
   * `store.db`'s pool (shared/runner/bell.ts): a job enqueued then starts
   * without waiting for the poll. Only for a pool of two connections or
   * more: the claims need one. Default: off (the deployed runners turn it
   * on).
   */
  bell?: boolean;
  /** Stay (claiming every `pollMs`) at least until this time on `clock`: started ahead of a due job. */
  waitUntil?: number;
  /**
   * What a handler's follow-ups (`ctx.enqueue`) are held to beyond the fixed
   * bounds, as every enqueue with a known config: the deployment's serving
   * rules, the payload limit. Default: the fixed bounds only.
   */
  limits?: EnqueueLimits;
  /** Called after a follow-up enqueue this runner will not pick up itself (another queue, or later). */
  onFollowUp?: () => void;
  log?: WorkerLog;
  /** Called for every settled attempt, e.g. to publish metrics. */
  onSettled?: (event: SettledEvent) => void;
  /** Called with the ids of jobs that ended `dead` here (failed, timed out, or failed for good). */
  onDead?: (ids: string[]) => void;
  clock?: Clock;
}

/** The options `runWorker` paces itself by, with the config's defaults (shared/settings/config.ts) where one is not given. */
export type WorkerPacing = Required<Pick<WorkerOptions, "idleMs" | "pollMs" | "linger" | "fair">>;

/**
 * What `runWorker` runs with where `options` say nothing: the config's
 * runner defaults (`RUNNER_DEFAULTS`), so a worker started without them
 * behaves as a deployed runner with a bare config does.
 */
export function workerPacing(options: Partial<WorkerPacing>): WorkerPacing {
  return {
    idleMs: options.idleMs ?? RUNNER_DEFAULTS.idleMs,
    pollMs: options.pollMs ?? RUNNER_DEFAULTS.pollMs,
    linger: options.linger ?? RUNNER_DEFAULTS.linger,
    fair: options.fair ?? RUNNER_DEFAULTS.fair,
  };
}

export type SettleOutcome = "succeeded" | "failed" | "timeout" | "released" | "slept";

export interface SettledEvent {
  jobId: string;
  queue: string;
  name: string;
  /** The attempt it was charged as (a handler's `ctx.attempt`). */
  attempt: number;
  /** Its attempt row's number (a handler's `ctx.run`). */
  run: number;
  outcome: SettleOutcome;
  /** False when fencing refused it (the lease had been lost) or it was abandoned. */
  accepted: boolean;
  /** The job's status after an accepted failure or timeout. */
  status?: "queued" | "dead";
  durationMs: number;
}

export interface WorkerSummary {
  claimed: number;
  succeeded: number;
  failed: number;
  timedOut: number;
  released: number;
  /** Handlers that slept (`ctx.sleep`): back in the queue until their time, the attempt given back. */
  slept: number;
  /** Settles refused by fencing (the lease had been lost) or abandoned when it ran out. */
  stale: number;
  /**
   * Jobs this runner put back in the queue (a retry after its backoff, a
   * release, a sleep) and did not run again itself: work that only a wake-up starts
   * once this runner is gone.
   */
  leftQueued: number;
  /** Why the loop ended. */
  exit: "idle" | "time" | "database";
}
