import { retryDelayMs } from "./backoff.ts";
import { sql, type Store } from "./db.ts";
import { RETRY_OR_DEAD } from "./settle.ts";

/**
 * The rescue records the death of runners: it finds running jobs whose lease
 * has expired, records the expired attempt as `lease_expired` with the runner
 * that held it, and re-queues each job (with backoff) or marks it `dead` when
 * its attempts are used (invariant 3).
 *
 * When it can run a job twice: a runner that is alive but stalled past its
 * lease (a handler ignoring its AbortSignal) may still be working when the
 * rescue re-queues the job. Its late success is then refused by fencing, but
 * whatever side effects it had happened twice. Leases must be longer than the
 * work they cover.
 */

export interface ExpiredLease {
  id: string;
  name: string;
  attempts: number;
  maxAttempts: number;
  backoffMs: number;
  leaseToken: string;
  runnerId: string | null;
}

export type RescueDecision = { action: "retry"; delayMs: number } | { action: "dead" };

/** What to do with one expired lease: a pure function of the job. */
export function decideRescue(job: ExpiredLease, random: () => number = Math.random): RescueDecision {
  if (job.attempts >= job.maxAttempts) return { action: "dead" };
  return { action: "retry", delayMs: retryDelayMs(job.attempts, job.backoffMs, random) };
}

export interface DeadJob {
  id: string;
  name: string;
  attempts: number;
  /** How each attempt ended, in order: "lease_expired: ...", "failed: ...". */
  reasons: string[];
}

export interface RescueResult {
  rescued: number;
  dead: number;
  deadJobs: DeadJob[];
}

const FIND_EXPIRED = `
select id::text, name, attempts, max_attempts, backoff_ms, lease_token::text, runner_id
from leasehold.jobs
where status = 'running' and lease_expires_at <= now()
order by lease_expires_at
limit $1::integer`;

const RESCUE_JOBS = `
with s as (
  select * from unnest($1::bigint[], $2::uuid[], $3::float8[]) as s(id, token, delay_ms)
), done as (
  update leasehold.jobs j
  set ${RETRY_OR_DEAD},
      -- Its next attempt is its last: it runs alone (see migration 0005).
      suspect = j.attempts + 1 >= j.max_attempts,
      last_error = 'runner ' || coalesce(j.runner_id, 'unknown') || ' did not settle by '
                   || to_char(j.lease_expires_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  from s
  -- Guard: still running under the lease we read, and still expired. A job
  -- settled or re-claimed since the read has another token and is left alone.
  where j.id = s.id and j.lease_token = s.token and j.status = 'running' and j.lease_expires_at <= now()
  returning j.id, j.name, j.attempts, j.runner_id, j.started_at, j.status, j.last_error
), recorded as (
  insert into leasehold.job_attempts (job_id, attempt, runner_id, claimed_at, ended_at, outcome, error)
  select id, attempts, runner_id, started_at, now(), 'lease_expired', last_error from done
), gone as (
  -- A runner that let a lease expire is dead or stuck: it no longer counts
  -- as supply for the scheduler.
  delete from leasehold.runners where request_id in (select runner_id from done)
)
select id::text, name, attempts, status::text from done`;

const ATTEMPT_REASONS = `
select job_id::text, array_agg(outcome || coalesce(': ' || error, '') order by ended_at, attempt) as reasons
from leasehold.job_attempts where job_id = any($1::bigint[]) group by job_id`;

export interface RescueOptions {
  /** Expired leases read and written per round trip. */
  pageSize?: number;
  /** Stop after this many pages; the next pass continues. */
  maxPages?: number;
  random?: () => number;
}

/** Rescues every expired lease, a page at a time. Returns the counts and the jobs that died. */
export async function rescueExpiredLeases(store: Store, options: RescueOptions = {}): Promise<RescueResult> {
  const pageSize = options.pageSize ?? 500;
  const maxPages = options.maxPages ?? 100;
  const result: RescueResult = { rescued: 0, dead: 0, deadJobs: [] };
  const dead: { id: string; name: string; attempts: number }[] = [];

  for (let page = 0; page < maxPages; page++) {
    const { rows } = await store.db.query<{
      id: string;
      name: string;
      attempts: number;
      max_attempts: number;
      backoff_ms: number;
      lease_token: string;
      runner_id: string | null;
    }>(sql(store.schema, FIND_EXPIRED), [pageSize]);
    if (rows.length === 0) break;

    const delays = rows.map((r) => {
      const decision = decideRescue(
        {
          id: r.id,
          name: r.name,
          attempts: r.attempts,
          maxAttempts: r.max_attempts,
          backoffMs: r.backoff_ms,
          leaseToken: r.lease_token,
          runnerId: r.runner_id,
        },
        options.random,
      );
      return decision.action === "retry" ? decision.delayMs : 0;
    });
    const { rows: written } = await store.db.query<{ id: string; name: string; attempts: number; status: string }>(
      sql(store.schema, RESCUE_JOBS),
      [rows.map((r) => r.id), rows.map((r) => r.lease_token), delays],
    );
    for (const w of written) {
      if (w.status === "dead") dead.push({ id: w.id, name: w.name, attempts: w.attempts });
      else result.rescued++;
    }
    if (rows.length < pageSize) break;
  }

  result.dead = dead.length;
  if (dead.length > 0) {
    const { rows } = await store.db.query<{ job_id: string; reasons: string[] }>(sql(store.schema, ATTEMPT_REASONS), [
      dead.map((d) => d.id),
    ]);
    const reasons = new Map(rows.map((r) => [r.job_id, r.reasons]));
    result.deadJobs = dead.map((d) => ({ ...d, reasons: reasons.get(d.id) ?? [] }));
  }
  return result;
}
