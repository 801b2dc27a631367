import { sql, type Store } from "./db.ts";

/**
 * Settling ends an attempt. Every settle is fenced by the lease token
 * (invariant 4): it changes only jobs still `running` under the token the
 * caller holds, and returns which ones it changed. An id missing from the
 * result lost its lease (rescued, or re-claimed by another runner) and was
 * left untouched; the caller logs it as a stale settle.
 */

export interface Lease {
  id: string;
  leaseToken: string;
}

export interface Failure extends Lease {
  outcome: "failed" | "timeout";
  error: string;
  /** Delay before the retry, if the job has attempts left. */
  retryDelayMs: number;
}

const COMPLETE_JOBS = `
with done as (
  update leasehold.jobs j
  set status = 'succeeded', finished_at = now(), lease_token = null, lease_expires_at = null, suspect = false
  from unnest($1::bigint[], $2::uuid[]) as s(id, token)
  where j.id = s.id and j.lease_token = s.token and j.status = 'running' and j.lease_expires_at > now()
  returning j.id, j.attempts, j.runner_id, j.started_at
), recorded as (
  insert into leasehold.job_attempts (job_id, attempt, runner_id, claimed_at, ended_at, outcome)
  select id, attempts, runner_id, started_at, now(), 'succeeded' from done
)
select id::text from done`;

/**
 * Marks jobs succeeded and records their attempts, in one statement. A job
 * whose lease has already expired is not completed: its success came too
 * late, and the rescuer records the attempt as `lease_expired`.
 * Returns the ids it completed.
 */
export async function completeJobs(store: Store, leases: readonly Lease[]): Promise<Set<string>> {
  if (leases.length === 0) return new Set();
  const { rows } = await store.db.query<{ id: string }>(sql(store.schema, COMPLETE_JOBS), [
    leases.map((l) => l.id),
    leases.map((l) => l.leaseToken),
  ]);
  return new Set(rows.map((r) => r.id));
}

/**
 * The end of a failed attempt (failed, timed out, or its lease expired), as a
 * SET list over `jobs j` and a source `s` with `delay_ms`: back to `queued`
 * after the delay, or `dead` when it was the last attempt. Shared by fail and
 * rescue so the two can never disagree; static text, no values in it.
 */
export const RETRY_OR_DEAD = `
  status = (case when j.attempts >= j.max_attempts then 'dead' else 'queued' end)::leasehold.job_status,
  run_at = case when j.attempts >= j.max_attempts then j.run_at
                else now() + s.delay_ms * interval '1 millisecond' end,
  finished_at = case when j.attempts >= j.max_attempts then now() end,
  lease_token = null, lease_expires_at = null`;

const FAIL_JOBS = `
with s as (
  select * from unnest($1::bigint[], $2::uuid[], $3::text[], $4::text[], $5::float8[])
    as s(id, token, outcome, error, delay_ms)
), done as (
  update leasehold.jobs j
  set ${RETRY_OR_DEAD}, last_error = s.error, suspect = false
  from s
  where j.id = s.id and j.lease_token = s.token and j.status = 'running'
  returning j.id, j.attempts, j.runner_id, j.started_at, j.status, s.outcome, s.error
), recorded as (
  insert into leasehold.job_attempts (job_id, attempt, runner_id, claimed_at, ended_at, outcome, error)
  select id, attempts, runner_id, started_at, now(), outcome::leasehold.attempt_outcome, error from done
)
select id::text, status::text from done`;

/**
 * Records failed or timed-out attempts, in one statement: each job goes back
 * to `queued` after its retry delay, or to `dead` if that was its last
 * attempt. Returns the new status of each job it changed.
 */
export async function failJobs(store: Store, failures: readonly Failure[]): Promise<Map<string, "queued" | "dead">> {
  if (failures.length === 0) return new Map();
  const { rows } = await store.db.query<{ id: string; status: "queued" | "dead" }>(sql(store.schema, FAIL_JOBS), [
    failures.map((f) => f.id),
    failures.map((f) => f.leaseToken),
    failures.map((f) => f.outcome),
    failures.map((f) => f.error),
    failures.map((f) => f.retryDelayMs),
  ]);
  return new Map(rows.map((r) => [r.id, r.status]));
}

const RELEASE_JOBS = `
with done as (
  update leasehold.jobs j
  set status = 'queued', attempts = j.attempts - 1, lease_token = null, lease_expires_at = null
  from unnest($1::bigint[], $2::uuid[]) as s(id, token)
  where j.id = s.id and j.lease_token = s.token and j.status = 'running'
  returning j.id, j.attempts + 1 as attempt, j.runner_id, j.started_at
), recorded as (
  insert into leasehold.job_attempts (job_id, attempt, runner_id, claimed_at, ended_at, outcome)
  select id, attempt, runner_id, started_at, now(), 'released' from done
)
select id::text from done`;

/**
 * Gives jobs back without charging the attempt: for jobs a runner claimed but
 * will not start (it is about to run out of time). Returns the ids released.
 */
export async function releaseJobs(store: Store, leases: readonly Lease[]): Promise<Set<string>> {
  if (leases.length === 0) return new Set();
  const { rows } = await store.db.query<{ id: string }>(sql(store.schema, RELEASE_JOBS), [
    leases.map((l) => l.id),
    leases.map((l) => l.leaseToken),
  ]);
  return new Set(rows.map((r) => r.id));
}

const EXTEND_LEASE = `
update leasehold.jobs
set lease_expires_at = now() + $3::integer * interval '1 millisecond'
where id = $1::bigint and lease_token = $2::uuid and status = 'running' and lease_expires_at > now()
returning lease_expires_at`;

/**
 * Extends a valid lease to `leaseMs` from now. Returns the new expiry, or
 * null if the lease was already lost or expired.
 */
export async function extendLease(store: Store, lease: Lease, leaseMs: number): Promise<Date | null> {
  const { rows } = await store.db.query<{ lease_expires_at: Date }>(sql(store.schema, EXTEND_LEASE), [
    lease.id,
    lease.leaseToken,
    Math.floor(leaseMs),
  ]);
  return rows[0]?.lease_expires_at ?? null;
}
