import { sql, type Store } from "../db/db.ts";
import { WINDOW_FULL, WINDOW_OPENS } from "../lifecycle/rate-limit-sql.ts";

/** One group of one queue, as the fair claim shares it. */
export interface GroupStats {
  queue: string;
  /** The share's group; null for ungrouped jobs (and job types that opt out of fairness). */
  group: string | null;
  /** Queued and due now. */
  ready: number;
  running: number;
  /** The concurrency limit its jobs carry (the largest, if they differ); null when none has one. */
  limit: number | null;
}

/** The cap on groups listed; the busiest come first. */
export const MAX_GROUPS_LISTED = 500;

// Reads the queued and running jobs only, as queueStats does; the busiest
// groups first, so the cap keeps the ones an operator looks for.
const GROUP_STATS = `
select queue, nullif(fair_group, '') as "group",
       count(*) filter (where status = 'queued' and run_at <= now())::integer as ready,
       count(*) filter (where status = 'running')::integer as running,
       max(concurrency_limit) as "limit"
from leasehold.jobs
where status in ('queued', 'running') and ($1::text is null or queue = $1::text)
group by queue, fair_group
order by count(*) desc, queue, fair_group
limit $2::integer`;

/** Per queue and group: ready and running jobs and the concurrency limit, busiest first. */
export async function groupStats(store: Store, options: { queue?: string; limit?: number } = {}): Promise<GroupStats[]> {
  const limit = Math.min(Math.max(options.limit ?? MAX_GROUPS_LISTED, 1), MAX_GROUPS_LISTED);
  const { rows } = await store.db.query<GroupStats>(sql(store.schema, GROUP_STATS), [options.queue ?? null, limit]);
  return rows;
}

/** One rate limit key with jobs waiting on it. */
export interface RateLimitStats {
  key: string;
  /** Queued and due jobs carrying the key. */
  waiting: number;
  /** The limit and period its waiting jobs carry (the smallest limit and longest period, if they differ). */
  limit: number;
  periodMs: number;
  /** Starts in the last period. */
  startedInWindow: number;
  /** When the window next lets a job start, if it is full now; null when a job may start now. */
  opensAt: Date | null;
}

// Reads the queued rate-limited jobs through jobs_rate_ready_idx, and each
// key's window: the keys with the most waiting first.
const RATE_LIMIT_STATS = `
with waiting as (
  select rate_key as key, count(*)::integer as waiting, min(rate_limit) as rate_limit, max(rate_period_ms) as period_ms
  from leasehold.jobs
  where status = 'queued' and rate_key is not null and run_at <= now() and ($1::text is null or queue = $1::text)
  group by rate_key
  order by count(*) desc, rate_key
  limit $2::integer
)
select k.key, k.waiting, k.rate_limit as "limit", k.period_ms as "periodMs",
       coalesce((select count(*) from unnest(w.starts) t where t > now() - k.period_ms * interval '1 millisecond'), 0)::integer
         as "startedInWindow",
       case when ${WINDOW_FULL("w", "k.rate_limit", "k.period_ms")}
            then ${WINDOW_OPENS("w", "k.rate_limit", "k.period_ms")} end as "opensAt"
from waiting k left join leasehold.rate_windows w on w.key = k.key
order by k.waiting desc, k.key`;

/** Per rate limit key with due jobs: how many wait, the window's starts, and when it opens if full; most waiting first. */
export async function rateLimitStats(store: Store, options: { queue?: string; limit?: number } = {}): Promise<RateLimitStats[]> {
  const limit = Math.min(Math.max(options.limit ?? MAX_GROUPS_LISTED, 1), MAX_GROUPS_LISTED);
  const { rows } = await store.db.query<RateLimitStats>(sql(store.schema, RATE_LIMIT_STATS), [options.queue ?? null, limit]);
  return rows.map((r) => ({ ...r, opensAt: r.opensAt && new Date(r.opensAt) }));
}
