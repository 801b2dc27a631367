/**
 * The rate limits' SQL: the parts the claim statements (shared/lifecycle/claim-sql.ts)
 * take to admit rate-limited jobs and record their starts, the pre-filter
 * that skips a full key's jobs (also read by the next-due time and the
 * stats), and when a full window opens. Same conventions as the claim: the
 * claim's parameters ($1 queue, ..., $8 the rate-limited jobs it may start)
 * and CTE names (`picked`, `admitted`).
 */

/**
 * A key's window `w` is full for a limit and period: it holds `limit` starts
 * within the period. The window's starts are kept oldest first, so that is
 * one look at the limit-th newest; it opens one period after that start.
 */
const LIMITTH_NEWEST = (w: string, limit: string) => `${w}.starts[cardinality(${w}.starts) - ${limit} + 1]`;
export const WINDOW_FULL = (w: string, limit: string, periodMs: string) =>
  `cardinality(${w}.starts) >= ${limit} and ${LIMITTH_NEWEST(w, limit)} > now() - ${periodMs} * interval '1 millisecond'`;
export const WINDOW_OPENS = (w: string, limit: string, periodMs: string) =>
  `${LIMITTH_NEWEST(w, limit)} + ${periodMs} * interval '1 millisecond'`;

/**
 * Whether job `j`'s rate limit key has no room now, as read from the
 * statement's snapshot: a pre-filter that keeps a full key's jobs from taking
 * a claim's places; the locked window decides (`RATE_ADMIT`).
 */
export const RATE_FULL = (j: string) => `exists (select 1 from leasehold.rate_windows w
        where w.key = ${j}.rate_key and ${WINDOW_FULL("w", `${j}.rate_limit`, `${j}.rate_period_ms`)})`;

/**
 * Rate limits, before the concurrency limits: a picked job with a rate key is
 * admitted only if its key's window row is locked here (SKIP LOCKED, as a
 * concurrency key's) or is new and inserted here, it is among the first $8
 * rate-limited jobs of the claim (the runner's free slots: a rate-limited job
 * is claimed only to start at once, since its claim is its start), and the
 * window's starts within the job's period, plus the key's jobs ahead of it in
 * this claim, stay within its limit. Counting every start later than one
 * period before this statement's now(), with no upper bound, keeps the rule
 * whatever order concurrent claims commit in: of any starts within one period
 * of each other, the last to commit counted all the others.
 */
export const RATE_ADMIT = `, rate_keyed as (
  select distinct rate_key as key from picked where rate_key is not null
), rate_locked as (
  select w.key, w.starts from leasehold.rate_windows w
  where w.key in (select key from rate_keyed)
  for update skip locked
), rate_fresh as (
  select k.key from rate_keyed k where not exists (select 1 from leasehold.rate_windows w where w.key = k.key)
), rate_admitted as (
  select p.* from (
    select p.*, row_number() over (partition by p.rate_key order by p.ord) as key_nth,
           row_number() over (partition by p.rate_key is null order by p.ord) as rated_nth
    from picked p
  ) p
  left join rate_locked l on l.key = p.rate_key
  where p.rate_key is null
     or p.rated_nth <= $8::integer
        and (l.key is not null or p.rate_key in (select key from rate_fresh))
        and p.key_nth + coalesce((select count(*) from unnest(l.starts) t
                                  where t > now() - p.rate_period_ms * interval '1 millisecond'), 0) <= p.rate_limit
)`;

/**
 * The admitted starts, appended to their keys' windows in the same statement
 * as the jobs: each window keeps its starts oldest first, only those within
 * the period and at most the limit of them (the newest), all a claim reads.
 */
export const RATE_WRITES = `, rate_counts as (
  select rate_key as key, count(*)::integer as starts, max(rate_limit) as max_limit, max(rate_period_ms) as period_ms
  from admitted where rate_key is not null group by 1
), rate_held as (
  update leasehold.rate_windows w
  set starts = (select coalesce(array_agg(k.t order by k.t), '{}') from (
                  select t from (
                    select t from unnest(w.starts) t where t > now() - n.period_ms * interval '1 millisecond'
                    union all
                    select now() from generate_series(1, n.starts)
                  ) a order by t desc limit n.max_limit
                ) k),
      period_ms = n.period_ms
  from rate_counts n
  where w.key = n.key and n.key in (select key from rate_locked)
  returning w.key
), rate_added as (
  insert into leasehold.rate_windows (key, starts, period_ms)
  select n.key, array_fill(now(), array[least(n.starts, n.max_limit)]), n.period_ms
  from rate_counts n where n.key in (select key from rate_fresh) order by 1
  on conflict do nothing
  returning key
)`;

/** The claim's condition that a rate-limited job's window was written (held or added) in this statement. */
export const RATE_CLAIMED = " and (a.rate_key is null or a.rate_key in (select key from rate_held union all select key from rate_added))";

/**
 * When the first full window of a key with ready jobs opens (null: none is
 * full), read from the windows that can be full (a start within their
 * period), each with one ready job of its key that a runner could claim:
 * `claimable` selects such a job's `rate_limit` and `rate_period_ms` for key
 * `w.key` (a job's limit and period are its own).
 */
export const FIRST_WINDOW_OPENING = (claimable: string) => `(select min(${WINDOW_OPENS("w", "j.rate_limit", "j.rate_period_ms")})
from leasehold.rate_windows w
cross join lateral (${claimable} limit 1) j
where w.starts[cardinality(w.starts)] > now() - w.period_ms * interval '1 millisecond'
  and ${WINDOW_FULL("w", "j.rate_limit", "j.rate_period_ms")})`;

/** `FIRST_WINDOW_OPENING` for one runner: $1 its queues, $2 the longest lease, $3 job names or null. */
export const RATE_OPENS_AT = `
select ${FIRST_WINDOW_OPENING(`select j.rate_limit, j.rate_period_ms from leasehold.jobs j
  where j.status = 'queued' and j.rate_key = w.key and j.queue = any($1::text[]) and j.run_at <= now()
    and j.lease_ms <= $2::integer and not j.suspect and ($3::text[] is null or j.name = any($3::text[]))`)} as opens_at, now() as now`;
