import { FIRST_WINDOW_OPENING, RATE_FULL } from "../lifecycle/rate-limit-sql.ts";
import { sql, type Store } from "../db/db.ts";
import type { Claimable } from "../settings/serving.ts";

/**
 * When something next needs the system: the earliest queued job's run_at
 * (delayed jobs, retries after backoff; a due job whose rate limit window is
 * full counts from when it opens) or running job's lease expiry (a runner
 * that died). Both read partial indexes only. `now` is the database's
 * clock, so callers compare like with like.
 */
export interface NextDue {
  /** The database's now. */
  now: Date;
  /** Earliest run_at of a queued job, due or not; null when none is queued. */
  runAt: Date | null;
  /** Earliest run_at of a queued job not due yet, or rate limit window opening for a due one; null when none. */
  laterAt: Date | null;
  /** Earliest lease expiry of a running job; null when none runs. */
  leaseExpiresAt: Date | null;
}

/**
 * A served queue's job counts if its lease fits the longest that queue's
 * runners allow ($2, in $1's order): an expression of the row, not a join,
 * so that each earliest time is one walk of jobs_queued_run_at_idx in run_at
 * order that stops at the first claimable job. Joined to the served queues,
 * the min() was planned as a scan of the whole table.
 */
const SERVED = `j.status = 'queued' and j.queue = any($1::text[])
  and j.lease_ms <= ($2::integer[])[array_position($1::text[], j.queue)] and j.name = any($3::text[])`;

const NEXT_DUE = `
select now() as now,
       (select j.run_at from leasehold.jobs j where ${SERVED} and (j.rate_key is null or not ${RATE_FULL("j")})
        order by j.run_at limit 1) as run_at,
       least(
         (select j.run_at from leasehold.jobs j where ${SERVED} and j.run_at > now() order by j.run_at limit 1),
         ${FIRST_WINDOW_OPENING(`select j.rate_limit, j.rate_period_ms from leasehold.jobs j
            where ${SERVED} and j.rate_key = w.key and j.run_at <= now()`)}) as later_at,
       (select min(lease_expires_at) from leasehold.jobs where status = 'running') as lease_expires_at`;

/** Queued jobs count only when a runner can claim them (`can`): an unserved job wakes nothing. */
export async function nextDue(store: Store, can: Claimable): Promise<NextDue> {
  const { rows } = await store.db.query<{ now: Date; run_at: Date | null; later_at: Date | null; lease_expires_at: Date | null }>(
    sql(store.schema, NEXT_DUE), [[...can.maxLeaseMs.keys()], [...can.maxLeaseMs.values()], can.names],
  );
  const r = rows[0]!;
  return {
    now: new Date(r.now), runAt: r.run_at && new Date(r.run_at), laterAt: r.later_at && new Date(r.later_at),
    leaseExpiresAt: r.lease_expires_at && new Date(r.lease_expires_at),
  };
}

const WATCH = `
insert into leasehold.wake_watch as w (id, owner, due_at, watch_until)
values (1, $1::text, $2::timestamptz, now() + $3::integer * interval '1 millisecond')
on conflict (id) do update set owner = excluded.owner, due_at = excluded.due_at, watch_until = excluded.watch_until
where w.watch_until < now() or w.owner = excluded.owner or w.due_at > excluded.due_at or w.owner = $4::text
returning owner`;

/**
 * Claims the watch of `dueAt` for `owner` for `forMs`: true when this owner
 * now watches it, false when a live watcher already covers an earlier or
 * equal due time (it re-plans when it wakes, and so covers this one). A
 * successor takes the watch from the invocation that started it (`from`).
 */
export async function watchDue(store: Store, owner: string, dueAt: Date, forMs: number, from: string | null = null): Promise<boolean> {
  const { rows } = await store.db.query(sql(store.schema, WATCH), [owner, dueAt, Math.ceil(forMs), from]);
  return rows.length > 0;
}

/** Lets go of the watch if `owner` holds it: the next invocation to plan takes it at once. */
export async function releaseWatch(store: Store, owner: string): Promise<void> {
  await store.db.query(sql(store.schema, "delete from leasehold.wake_watch where owner = $1::text"), [owner]);
}
