import { sql, type Store } from "./db.ts";

/** A job as a runner holds it: enough to run it and to settle it. */
export interface ClaimedJob {
  id: string;
  queue: string;
  name: string;
  payload: unknown;
  /** This attempt's number, 1-based; already counted. */
  attempts: number;
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
}

const claimSql = (which: "not suspect" | "suspect") => `
with picked as (
  select id from leasehold.jobs
  where status = 'queued' and queue = $1::text and run_at <= now() and lease_ms <= $3::integer and ${which}
  order by priority desc, run_at, id
  limit $2::integer
  for update skip locked
)
update leasehold.jobs j
set status = 'running',
    attempts = j.attempts + 1,
    lease_token = gen_random_uuid(),
    lease_expires_at = now() + j.lease_ms * interval '1 millisecond',
    runner_id = $4::text,
    started_at = now()
from picked
where j.id = picked.id
returning j.id::text, j.queue, j.name, j.payload, j.attempts, j.max_attempts, j.lease_ms, j.backoff_ms, j.lease_token::text`;

const CLAIM_JOBS = claimSql("not suspect");
const CLAIM_SUSPECTS = claimSql("suspect");

/**
 * Claims up to `limit` ready jobs of one queue in one statement: each gets its
 * attempt counted (invariant 1), a fresh lease token (invariant 4), a lease
 * expiry and the runner id. `SKIP LOCKED` keeps concurrent claimers apart
 * (invariant 2); a job held under a lease is `running` and never matches.
 * The attempt row is written when the attempt ends (settle or rescue).
 * Suspects are claimed apart (`suspects: true`), to be run alone.
 */
export async function claimJobs(store: Store, args: ClaimArgs): Promise<ClaimedJob[]> {
  if (args.limit <= 0 || args.maxLeaseMs <= 0) return [];
  const { rows } = await store.db.query<ClaimedRow>(sql(store.schema, args.suspects ? CLAIM_SUSPECTS : CLAIM_JOBS), [
    args.queue, args.limit, Math.floor(Math.min(args.maxLeaseMs, 2 ** 31 - 1)), args.runnerId,
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
  max_attempts: number;
  lease_ms: number;
  backoff_ms: number;
  lease_token: string;
}

export function toClaimed(r: ClaimedRow): ClaimedJob {
  return {
    id: r.id, queue: r.queue, name: r.name, payload: r.payload, attempts: r.attempts,
    maxAttempts: r.max_attempts, leaseMs: r.lease_ms, backoffMs: r.backoff_ms, leaseToken: r.lease_token,
  };
}

const SUSPECT_WAITING = `
select exists (
  select 1 from leasehold.jobs
  where status = 'queued' and suspect and queue = any($1::text[]) and run_at <= now() and lease_ms <= $2::integer
) as waiting`;

/** Whether a suspect is ready in any of `queues`: a look at a tiny partial index. */
export async function suspectWaiting(store: Store, queues: readonly string[], maxLeaseMs: number): Promise<boolean> {
  const { rows } = await store.db.query<{ waiting: boolean }>(sql(store.schema, SUSPECT_WAITING), [
    queues, Math.floor(Math.min(maxLeaseMs, 2 ** 31 - 1)),
  ]);
  return rows[0]?.waiting ?? false;
}
