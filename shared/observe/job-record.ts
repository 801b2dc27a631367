import type { AttemptOutcome, JobStatus } from "../jobs/job-types.ts";
import type { StepLogEntry } from "../runner/steps.ts";

/** A job as the operator's views show it (API, CLI, dashboard), and the columns it is read from. */

export interface JobRecord {
  id: string;
  queue: string;
  name: string;
  payload: unknown;
  status: JobStatus;
  priority: number;
  runAt: Date;
  attempts: number;
  maxAttempts: number;
  /** 1, plus one for each manual retry of the dead job: a retry is a new generation of the same job. */
  generation: number;
  leaseExpiresAt: Date | null;
  runnerId: string | null;
  group: string | null;
  dedupeKey: string | null;
  lastError: string | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}

export interface AttemptRecord {
  /**
   * The run this row records (a handler's `ctx.run`): 1 on the first, one
   * more per claim, unique for the life of the job across releases and
   * manual retries.
   */
  run: number;
  generation: number;
  runnerId: string | null;
  claimedAt: Date;
  endedAt: Date;
  outcome: AttemptOutcome;
  error: string | null;
  /**
   * The steps this attempt reached, in order: replayed from the record or
   * run, and how long each took. Null when it used none. For an attempt whose
   * runner died, the steps it ran and recorded (what it replayed is not known).
   */
  steps: StepLogEntry[] | null;
}

/** A completed step as recorded: which attempt ran it, how long it took, its result. */
export interface StepRecord {
  generation: number;
  /** 1 for the first step the handler reaches. */
  position: number;
  name: string;
  /** The attempt that ran it. */
  attempt: number;
  durationMs: number;
  recordedAt: Date;
  result: unknown;
}

export const JOB_COLUMNS = `id::text, queue, name, payload, status::text, priority, run_at, attempts, max_attempts, generation,
  lease_expires_at, runner_id, group_key, dedupe_key, last_error, created_at, started_at, finished_at`;

export type JobRow = {
  id: string; queue: string; name: string; payload: unknown; status: JobStatus; priority: number; run_at: Date;
  attempts: number; max_attempts: number; generation: number; lease_expires_at: Date | null; runner_id: string | null;
  group_key: string | null; dedupe_key: string | null; last_error: string | null; created_at: Date;
  started_at: Date | null; finished_at: Date | null;
};

export function toJob(r: JobRow): JobRecord {
  return {
    id: r.id, queue: r.queue, name: r.name, payload: r.payload, status: r.status, priority: r.priority,
    runAt: r.run_at, attempts: r.attempts, maxAttempts: r.max_attempts, generation: r.generation, leaseExpiresAt: r.lease_expires_at,
    runnerId: r.runner_id, group: r.group_key, dedupeKey: r.dedupe_key, lastError: r.last_error,
    createdAt: r.created_at, startedAt: r.started_at, finishedAt: r.finished_at,
  };
}

