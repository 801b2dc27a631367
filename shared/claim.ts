import { sql, type Store } from "./db.ts";

/** A job as a runner holds it: enough to run it and to settle it. */
export interface ClaimedJob {
  id: string;
  queue: string;
  name: string;
  payload: unknown;
  /** Attempts charged so far, this one included (1 on the first). */
  attempts: number;
  /** This attempt's number for the life of the job: its attempt row's number. */
  run: number;
  /** Given an attempt back after a death: its start is recorded before its handler runs. */
  startFirst: boolean;
  maxAttempts: number;
  leaseMs: number;
  backoffMs: number;
  leaseToken: string;
}

export interface ClaimArgs {
  queue: string;
  runnerId: string;
  /** Claim at most this many. */
  limit: number;
  /**
   * The longest lease the caller can still honour (its remaining time less a
   * margin). Jobs whose lease is longer are left for another runner.
   */
  maxLeaseMs: number;
  /** Claim suspects (jobs whose runner died holding them) instead of other jobs. */
  suspects?: boolean;
  /** Only jobs of these types (the ones the runner knows); all types when absent. */
  names?: readonly string[];
}

const claimSql = (which: "not suspect" | "suspect") => `
with picked as (
  select id from leasehold.jobs
  where status = 'queued' and queue = $1::text and run_at <= now() and lease_ms <= $3::integer and ${which}
    and ($5::text[] is null or name = any($5::text[]))
  order by priority desc, run_at, id
  limit $2::integer
  for update skip locked
)
update leasehold.jobs j
set status = 'running',
    attempts = j.attempts + 1,
    runs = j.runs + 1,
    handler_started = false,
    lease_token = gen_random_uuid(),
    lease_expires_at = now() + j.lease_ms * interval '1 millisecond',
    runner_id = $4::text,
    started_at = now()
from picked
where j.id = picked.id
returning j.id::text, j.queue, j.name, j.payload, j.attempts, j.runs, j.start_first, j.max_attempts, j.lease_ms, j.backoff_ms,
  j.lease_token::text`;

const CLAIM_JOBS = claimSql("not suspect");
const CLAIM_SUSPECTS = claimSql("suspect");

/**
 * Claims up to `limit` ready jobs of one queue in one statement: each gets its
 * attempt counted (invariant 1), a fresh lease token (invariant 4), a lease
 * expiry and the runner id. `SKIP LOCKED` keeps concurrent claimers apart
 * (invariant 2); a job held under a lease is `running` and never matches.
 * The attempt row is written when the attempt ends (settle or rescue); the
 * handler's start is recorded by the runner (`handler_started`), so that a
 * death charges only jobs that had started.
 * Suspects are claimed apart (`suspects: true`), to be run alone.
 */
export async function claimJobs(store: Store, args: ClaimArgs): Promise<ClaimedJob[]> {
  if (args.limit <= 0 || args.maxLeaseMs <= 0) return [];
  const { rows } = await store.db.query<ClaimedRow>(sql(store.schema, args.suspects ? CLAIM_SUSPECTS : CLAIM_JOBS), [
    args.queue, args.limit, Math.floor(Math.min(args.maxLeaseMs, 2 ** 31 - 1)), args.runnerId, args.names ?? null,
  ]);
  return rows.map(toClaimed);
}

/** A claimed job as the database returns it. */
export interface ClaimedRow {
  id: string;
  queue: string;
  name: string;
  payload: unknown;
  attempts: number;
  runs: number;
  start_first: boolean;
  max_attempts: number;
  lease_ms: number;
  backoff_ms: number;
  lease_token: string;
}

export function toClaimed(r: ClaimedRow): ClaimedJob {
  return {
    id: r.id, queue: r.queue, name: r.name, payload: r.payload, attempts: r.attempts, run: r.runs, startFirst: r.start_first,
    maxAttempts: r.max_attempts, leaseMs: r.lease_ms, backoffMs: r.backoff_ms, leaseToken: r.lease_token,
  };
}

const SUSPECT_WAITING = `
select exists (
  select 1 from leasehold.jobs
  where status = 'queued' and suspect and queue = any($1::text[]) and run_at <= now() and lease_ms <= $2::integer
    and ($3::text[] is null or name = any($3::text[]))
) as waiting`;

/** Whether a suspect is ready in any of `queues`: a look at a tiny partial index. */
export async function suspectWaiting(
  store: Store,
  queues: readonly string[],
  maxLeaseMs: number,
  names?: readonly string[],
): Promise<boolean> {
  const { rows } = await store.db.query<{ waiting: boolean }>(sql(store.schema, SUSPECT_WAITING), [
    queues, Math.floor(Math.min(maxLeaseMs, 2 ** 31 - 1)), names ?? null,
  ]);
  return rows[0]?.waiting ?? false;
}
