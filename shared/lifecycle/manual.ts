import { sql, type Store } from "../db/db.ts";
import { JOB_COLUMNS, toJob, type JobRecord, type JobRow } from "../observe/job-record.ts";

/** The operator's transitions: cancel a queued job, retry a dead one (one or a page of them). */

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
