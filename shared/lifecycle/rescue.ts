import { chargedAttempts, isLastAttempt, retryOrDead } from "./attempt-rules.ts";
import { retryDelayMs } from "./backoff.ts";
import { sql, type Store } from "../db/db.ts";

/**
 * The rescue records the death of runners: it finds running jobs whose lease
 * has expired and ends each expired attempt with the runner that held it
 * (invariant 3). A job whose handler had started is charged: its attempt is
 * recorded `lease_expired`, and it is re-queued with backoff, or marked `dead`
 * once its attempts are used. A job whose start was never recorded (it sat in
 * the runner's buffer, or the runner died before its next write) gets its
 * attempt back, recorded `released`, and owes it: from then on its starts are
 * recorded before its handler runs, and the next death charges the owed
 * attempt with its own. A job that kills its runner before any write still
 * starts exactly max_attempts times (invariant 1).
 *
 * When it can run a job twice: a runner that is alive but stalled past its
 * lease (a handler ignoring its AbortSignal, a frozen process) may still be
 * working when the rescue re-queues the job. Its late settle is then refused
 * by fencing, but whatever side effects it had happened twice. Leases must be
 * longer than the work they cover.
 */

export interface ExpiredLease {
  id: string;
  attempts: number;
  maxAttempts: number;
  backoffMs: number;
  /** Whether the runner recorded that the handler had started. */
  handlerStarted: boolean;
  /** Given an attempt back after an earlier death, and not yet charged for it. */
  owesAttempt: boolean;
}

export type RescueDecision =
  /** No start on record (the handler may have started, unrecorded): the attempt is given back. */
  | { action: "refund"; attempts: number }
  | { action: "retry"; attempts: number; delayMs: number; suspect: boolean }
  | { action: "dead"; attempts: number };

/** What to do with one expired lease: a pure function of the job. */
export function decideRescue(job: ExpiredLease, random: () => number = Math.random): RescueDecision {
  if (!job.handlerStarted) return { action: "refund", attempts: job.attempts - 1 };
  const attempts = chargedAttempts(job.attempts, job.owesAttempt, job.maxAttempts);
  if (retryOrDead(attempts, job.maxAttempts) === "dead") return { action: "dead", attempts };
  // Its next attempt is its last: it runs alone (see migration 0005).
  const suspect = isLastAttempt(attempts + 1, job.maxAttempts);
  return { action: "retry", attempts, delayMs: retryDelayMs(attempts, job.backoffMs, random), suspect };
}

export interface RescueResult {
  rescued: number;
  /** Expired leases with no start on record: given back uncharged. */
  refunded: number;
  dead: number;
  /** Ids of the jobs that died, for the death reporter. */
  deadIds: string[];
}

const FIND_EXPIRED = `
select id::text, attempts, max_attempts, backoff_ms, lease_token::text, handler_started, owes_attempt
from leasehold.jobs
where status = 'running' and lease_expires_at <= now()
order by lease_expires_at
limit $1::integer`;

const RESCUE_JOBS = `
with s as (
  select * from unnest($1::bigint[], $2::uuid[], $3::text[], $4::integer[], $5::float8[], $6::boolean[])
    as s(id, token, action, attempts, delay_ms, suspect)
), done as (
  update leasehold.jobs j
  set status = (case s.action when 'dead' then 'dead' else 'queued' end)::leasehold.job_status,
      attempts = s.attempts,
      run_at = case s.action when 'dead' then j.run_at else now() + s.delay_ms * interval '1 millisecond' end,
      finished_at = case s.action when 'dead' then now() end,
      lease_token = null, lease_expires_at = null,
      suspect = s.suspect,
      owes_attempt = s.action = 'refund',
      start_first = j.start_first or s.action = 'refund',
      last_error = case s.action
        when 'refund' then 'runner ' || coalesce(j.runner_id, 'unknown') || ' died with no start on record; attempt given back'
        else 'runner ' || coalesce(j.runner_id, 'unknown') || ' did not settle by '
             || to_char(j.lease_expires_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') end
  from s
  -- Guard: still running under the lease we read, and still expired. A job
  -- settled or re-claimed since the read has another token and is left alone.
  where j.id = s.id and j.lease_token = s.token and j.status = 'running' and j.lease_expires_at <= now()
  returning j.id, j.runs, j.generation, j.runner_id, j.started_at, j.last_error, j.awaited, s.action
), recorded as (
  insert into leasehold.job_attempts (job_id, attempt, generation, runner_id, claimed_at, ended_at, outcome, error)
  select id, runs, generation, runner_id, started_at, now(),
         (case action when 'refund' then 'released' else 'lease_expired' end)::leasehold.attempt_outcome, last_error
  from done
), gone as (
  -- A runner that let a lease expire is dead or stuck: it no longer counts
  -- as supply for the scheduler.
  delete from leasehold.runners where request_id in (select runner_id from done)
)
select d.id::text, d.action from done d
-- A death someone awaits (waitForJob) is told on its channel.
left join lateral (select pg_notify('leasehold_job_ended', 'leasehold.' || d.id::text) where d.awaited and d.action = 'dead') n on true`;

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
  const result: RescueResult = { rescued: 0, refunded: 0, dead: 0, deadIds: [] };

  for (let page = 0; page < maxPages; page++) {
    const { rows } = await store.db.query<{
      id: string; attempts: number; max_attempts: number; backoff_ms: number; lease_token: string;
      handler_started: boolean; owes_attempt: boolean;
    }>(sql(store.schema, FIND_EXPIRED), [pageSize]);
    if (rows.length === 0) break;

    const decisions = rows.map((r) =>
      decideRescue(
        {
          id: r.id, attempts: r.attempts, maxAttempts: r.max_attempts, backoffMs: r.backoff_ms,
          handlerStarted: r.handler_started, owesAttempt: r.owes_attempt,
        },
        options.random,
      ),
    );
    const { rows: written } = await store.db.query<{ id: string; action: RescueDecision["action"] }>(
      sql(store.schema, RESCUE_JOBS),
      [
        rows.map((r) => r.id), rows.map((r) => r.lease_token), decisions.map((d) => d.action),
        decisions.map((d) => d.attempts), decisions.map((d) => (d.action === "retry" ? d.delayMs : 0)),
        decisions.map((d) => d.action === "retry" && d.suspect),
      ],
    );
    for (const w of written) {
      if (w.action === "dead") result.deadIds.push(w.id);
      else if (w.action === "refund") result.refunded++;
      else result.rescued++;
    }
    if (rows.length < pageSize) break;
  }
  result.dead = result.deadIds.length;
  return result;
}
