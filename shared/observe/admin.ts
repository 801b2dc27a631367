import { sql, type Store } from "../db/db.ts";
import type { AttemptOutcome, JobStatus } from "../jobs/job-types.ts";
import type { StepLogEntry } from "../runner/steps.ts";
import { JOB_COLUMNS, toJob, type AttemptRecord, type JobRecord, type JobRow, type StepRecord } from "./job-record.ts";

export type { AttemptRecord, JobRecord, StepRecord } from "./job-record.ts";

/** Operator views: get a job with its attempts and steps, list jobs. Cancel and retry are transitions (shared/lifecycle/manual.ts). */

const GET_JOB = `select ${JOB_COLUMNS}, result from leasehold.jobs where id = $1::bigint`;
const GET_ATTEMPTS = `
select attempt as run, generation, runner_id, claimed_at, ended_at, outcome::text, error, steps
from leasehold.attempts where job_id = $1::bigint order by attempt`;
const GET_STEPS = `
select generation, seq, name, attempt, duration_ms, recorded_at, result
from leasehold.job_steps where job_id = $1::bigint order by generation, seq`;

type StepRow = { generation: number; seq: number; name: string; attempt: number; duration_ms: number; recorded_at: Date; result: unknown };

/** A job as `getJob` shows it: its result once it succeeded, and every attempt it has made. */
export interface JobDetail extends JobRecord {
  /** The handler's return value (JSON), kept with the succeeded job; null before, or when it returned nothing. */
  result: unknown;
  attemptHistory: AttemptRecord[];
  /** The completed steps of every generation, in order. */
  steps: StepRecord[];
}

/** A job with its result, every attempt it has made and every step it recorded, or null. */
export async function getJob(store: Store, id: string): Promise<JobDetail | null> {
  const [{ rows }, { rows: attempts }, { rows: steps }] = await Promise.all([
    store.db.query<JobRow & { result: unknown }>(sql(store.schema, GET_JOB), [id]),
    store.db.query<{
      run: number; generation: number; runner_id: string | null; claimed_at: Date; ended_at: Date; outcome: AttemptOutcome;
      error: string | null; steps: StepLogEntry[] | null;
    }>(sql(store.schema, GET_ATTEMPTS), [id]),
    store.db.query<StepRow>(sql(store.schema, GET_STEPS), [id]),
  ]);
  if (!rows[0]) return null;
  // An attempt that left no step log (its runner died): the steps it recorded.
  const ranIn = (attempt: number): StepLogEntry[] | null => {
    const ran = steps.filter((s) => s.attempt === attempt).map((s) => ({ name: s.name, replayed: false, ms: s.duration_ms }));
    return ran.length > 0 ? ran : null;
  };
  return {
    ...toJob(rows[0]),
    result: rows[0].result ?? null,
    attemptHistory: attempts.map((a) => ({
      run: a.run, generation: a.generation, runnerId: a.runner_id, claimedAt: a.claimed_at, endedAt: a.ended_at, outcome: a.outcome, error: a.error,
      steps: a.steps ?? (a.outcome === "lease_expired" ? ranIn(a.run) : null),
    })),
    steps: steps.map((s) => ({
      generation: s.generation, position: s.seq + 1, name: s.name, attempt: s.attempt, durationMs: s.duration_ms, recordedAt: s.recorded_at,
      result: s.result,
    })),
  };
}

export interface ListFilter {
  status?: JobStatus;
  queue?: string;
  name?: string;
  limit?: number;
  /** The `nextCursor` of the previous page. */
  cursor?: string;
}

const LIST_JOBS = `
select ${JOB_COLUMNS} from leasehold.jobs
where ($1::leasehold.job_status is null or status = $1::leasehold.job_status)
  and ($2::text is null or queue = $2::text)
  and ($3::text is null or name = $3::text)
  and ($4::bigint is null or id < $4::bigint)
order by jobs.id desc
limit $5::integer`;

/** Jobs newest first, filtered, a page at a time. */
export async function listJobs(store: Store, filter: ListFilter = {}): Promise<{ jobs: JobRecord[]; nextCursor: string | null }> {
  const limit = Math.min(Math.max(filter.limit ?? 50, 1), 500);
  const { rows } = await store.db.query<JobRow>(sql(store.schema, LIST_JOBS), [
    filter.status ?? null, filter.queue ?? null, filter.name ?? null, filter.cursor ?? null, limit + 1,
  ]);
  const page = rows.slice(0, limit).map(toJob);
  return { jobs: page, nextCursor: rows.length > limit ? page[page.length - 1]!.id : null };
}
