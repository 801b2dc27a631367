import { sql, type Store } from "../db/db.ts";
import type { AttemptOutcome, JobStatus } from "../jobs/job-types.ts";
import type { StepLogEntry } from "../runner/steps.ts";

/** Operator actions and views: cancel, retry, get, list. */

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

const JOB_COLUMNS = `id::text, queue, name, payload, status::text, priority, run_at, attempts, max_attempts, generation,
  lease_expires_at, runner_id, group_key, dedupe_key, last_error, created_at, started_at, finished_at`;

type JobRow = {
  id: string; queue: string; name: string; payload: unknown; status: JobStatus; priority: number; run_at: Date;
  attempts: number; max_attempts: number; generation: number; lease_expires_at: Date | null; runner_id: string | null;
  group_key: string | null; dedupe_key: string | null; last_error: string | null; created_at: Date;
  started_at: Date | null; finished_at: Date | null;
};

function toJob(r: JobRow): JobRecord {
  return {
    id: r.id, queue: r.queue, name: r.name, payload: r.payload, status: r.status, priority: r.priority,
    runAt: r.run_at, attempts: r.attempts, maxAttempts: r.max_attempts, generation: r.generation, leaseExpiresAt: r.lease_expires_at,
    runnerId: r.runner_id, group: r.group_key, dedupeKey: r.dedupe_key, lastError: r.last_error,
    createdAt: r.created_at, startedAt: r.started_at, finishedAt: r.finished_at,
  };
}

const CANCEL_JOB = `
with cancelled as (
  update leasehold.jobs set status = 'cancelled', finished_at = now()
  where id = $1::bigint and status = 'queued'
  returning ${JOB_COLUMNS}, awaited
)
select c.* from cancelled c
left join lateral (select pg_notify('leasehold_job_ended', 'leasehold.' || c.id) where c.awaited) n on true`;

/** Cancels a queued job. Returns it, or null if it is not queued (or does not exist). */
export async function cancelJob(store: Store, id: string): Promise<JobRecord | null> {
  const { rows } = await store.db.query<JobRow>(sql(store.schema, CANCEL_JOB), [id]);
  return rows[0] ? toJob(rows[0]) : null;
}

/** A manual retry: a new generation, fresh attempts, no suspicion carried over. */
const RETRIED = `status = 'queued', attempts = 0, run_at = now(), finished_at = null, generation = j.generation + 1,
  suspect = false, owes_attempt = false, start_first = false`;

const RETRY_JOB = `
update leasehold.jobs j
set ${RETRIED}
where id = $1::bigint and status = 'dead'
returning ${JOB_COLUMNS}`;

/**
 * Moves a dead job back to `queued` with its attempts reset, to run now.
 * Its earlier attempt rows stay. Returns it, or null if it is not dead.
 */
export async function retryJob(store: Store, id: string): Promise<JobRecord | null> {
  const { rows } = await store.db.query<JobRow>(sql(store.schema, RETRY_JOB), [id]);
  return rows[0] ? toJob(rows[0]) : null;
}

const GET_JOB = `select ${JOB_COLUMNS}, result from leasehold.jobs where id = $1::bigint`;
const GET_ATTEMPTS = `
select attempt as run, generation, runner_id, claimed_at, ended_at, outcome::text, error, steps
from leasehold.job_attempts where job_id = $1::bigint order by attempt`;
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

const RETRY_DEAD_JOBS = `
with picked as (
  select id from leasehold.jobs
  where status = 'dead' and ($1::text is null or queue = $1::text) and ($2::bigint is null or id < $2::bigint)
  order by id desc
  limit $3::integer
  for update skip locked
), retried as (
  update leasehold.jobs j set ${RETRIED}
  from picked where j.id = picked.id
  returning j.id
)
select (select count(*)::integer from retried) as retried,
       (select count(*)::integer from picked) as picked,
       (select min(id)::text from picked) as last_id`;

/**
 * Retries up to `limit` dead jobs (of one queue, if given) with ids below
 * `beforeId`, newest first, in one statement. Page on with `nextBeforeId`
 * until it is null: jobs that die again meanwhile are below no cursor and
 * are not retried twice.
 */
export async function retryDeadJobs(
  store: Store,
  options: { queue?: string; beforeId?: string; limit?: number } = {},
): Promise<{ retried: number; nextBeforeId: string | null }> {
  const limit = options.limit ?? 1_000;
  const { rows } = await store.db.query<{ retried: number; picked: number; last_id: string | null }>(
    sql(store.schema, RETRY_DEAD_JOBS),
    [options.queue ?? null, options.beforeId ?? null, limit],
  );
  const row = rows[0]!;
  return { retried: row.retried, nextBeforeId: row.picked < limit ? null : row.last_id };
}
