import { CONCURRENCY_FULL } from "../lifecycle/claim-sql.ts";
import { RATE_FULL } from "../lifecycle/rate-limit-sql.ts";
import { sql, type Store } from "../db/db.ts";
import type { Claimable } from "../settings/serving.ts";

export interface QueueStats {
  queue: string;
  /** Queued and due now. */
  ready: number;
  /**
   * Of the ready jobs, those no runner can claim: their queue is not served,
   * their type is not in the runners' registry, or their lease is longer
   * than the runner serving the queue allows. They wait uncharged.
   */
  unserved: number;
  /** Queued for later (delayed or backing off). */
  delayed: number;
  running: number;
  dead: number;
  /** Seconds the oldest ready job has waited past its run_at; 0 if none. */
  oldestReadyAgeSeconds: number;
}

// Each count reads only queued, running or dead jobs, through their partial
// indexes: the table's finished jobs, however many, are never scanned. A
// ready job is unserved when its queue is not among $1 (each with its longest
// lease in $2) or its name is not among $3; with no $3, none is.
const QUEUE_STATS = `
with served as (
  select * from unnest($1::text[], $2::integer[]) as s(queue, max_lease_ms)
), pending as (
  select j.queue,
         count(*) filter (where j.run_at <= now()) as ready,
         count(*) filter (where j.run_at <= now() and $3::text[] is not null and
           (s.queue is null or j.lease_ms > s.max_lease_ms or not j.name = any($3::text[]))) as unserved,
         count(*) filter (where j.run_at > now()) as delayed,
         min(j.run_at) filter (where j.run_at <= now()) as oldest
  from leasehold.jobs j left join served s on s.queue = j.queue
  where j.status = 'queued' group by j.queue
), running as (
  select queue, count(*) as running from leasehold.jobs where status = 'running' group by queue
), dead as (
  select queue, count(*) as dead from leasehold.jobs where status = 'dead' group by queue
)
select coalesce(p.queue, r.queue, d.queue) as queue,
       coalesce(p.ready, 0)::integer as ready, coalesce(p.unserved, 0)::integer as unserved,
       coalesce(p.delayed, 0)::integer as delayed,
       coalesce(r.running, 0)::integer as running, coalesce(d.dead, 0)::integer as dead,
       coalesce(extract(epoch from now() - p.oldest), 0)::float8 as oldest_ready_age_seconds
from pending p
full join running r on r.queue = p.queue
full join dead d on d.queue = coalesce(p.queue, r.queue)
order by 1`;

/**
 * Per-queue counts and the oldest ready age. Given what the runners can
 * claim (`claimable(config, registry.keys())`), ready jobs outside it are
 * counted `unserved`; without it, none are.
 */
export async function queueStats(store: Store, can?: Claimable): Promise<QueueStats[]> {
  const { rows } = await store.db.query<{
    queue: string; ready: number; unserved: number; delayed: number; running: number; dead: number; oldest_ready_age_seconds: number;
  }>(sql(store.schema, QUEUE_STATS), [
    can ? [...can.maxLeaseMs.keys()] : [], can ? [...can.maxLeaseMs.values()] : [], can ? can.names : null,
  ]);
  return rows.map((r) => ({
    queue: r.queue, ready: r.ready, unserved: r.unserved, delayed: r.delayed, running: r.running, dead: r.dead,
    oldestReadyAgeSeconds: Math.max(0, r.oldest_ready_age_seconds),
  }));
}

const READY_COUNT = `
select k.key, least(k.cap, (
  select count(*) from (
    select 1 from unnest($2::text[], $3::text[], $4::integer[]) as s(key, queue, max_lease_ms)
    cross join lateral (
      select 1 from leasehold.jobs j
      where j.status = 'queued' and j.queue = s.queue and j.run_at <= now() + $7::integer * interval '1 millisecond'
        and j.lease_ms <= s.max_lease_ms and j.name = any($6::text[])
        and (j.rate_key is null or not ${RATE_FULL("j")})
        and (j.concurrency_key is null or not ${CONCURRENCY_FULL("j")})
      limit $8::integer
    ) claimable
    where s.key = k.key
    -- The largest cap, a parameter, as each limit: the planner knows how few rows it needs.
    limit $8::integer
  ) capped))::integer as ready
from unnest($1::text[], $5::integer[]) as k(key, cap)`;

/** One runner's demand to count: the leases it allows by queue (`claimable(...).maxLeaseMs`), counted up to `cap`. */
export interface ReadyCount {
  key: string;
  maxLeaseMs: ReadonlyMap<string, number>;
  cap: number;
}

/**
 * Ready jobs a runner can claim (its queues, its job types, leases it
 * allows: `claimable({ runners: { name: runner } }, registry.keys())`),
 * counted up to `cap`: the scheduler's demand signal, cheap every second
 * whatever the backlog. Jobs no runner can claim are no demand, nor are jobs
 * whose rate limit window is full (`nextDue` gives its opening) or whose
 * concurrency key has no free slot (the runner that frees one claims next). `horizonMs`
 * counts jobs coming due that soon too (runners are started ahead of a due time).
 */
export async function countReady(store: Store, can: Claimable, cap: number, horizonMs = 0): Promise<number> {
  return (await countReadyEach(store, can.names, [{ key: "", maxLeaseMs: can.maxLeaseMs, cap }], horizonMs)).get("")!;
}

/** `countReady` for several runners of the same job types in one statement (a scheduler pass's one round trip), by key. */
export async function countReadyEach(
  store: Store, names: readonly string[], counts: readonly ReadyCount[], horizonMs = 0,
): Promise<Map<string, number>> {
  const rows = counts.flatMap(({ key, maxLeaseMs }) => [...maxLeaseMs].map(([queue, lease]) => ({ key, queue, lease })));
  const { rows: found } = await store.db.query<{ key: string; ready: number }>(sql(store.schema, READY_COUNT), [
    counts.map((c) => c.key), rows.map((r) => r.key), rows.map((r) => r.queue), rows.map((r) => r.lease), counts.map((c) => c.cap),
    names, Math.ceil(horizonMs), Math.max(0, ...counts.map((c) => c.cap)),
  ]);
  // One row per runner, 0 when nothing is ready.
  return new Map(found.map((r) => [r.key, r.ready]));
}

const PRUNE_JOBS = `
with old as (
  delete from leasehold.jobs j
  where j.id in (
    select id from leasehold.jobs
    where status in ('succeeded', 'dead', 'cancelled') and finished_at < now() - $1::float8 * interval '1 millisecond'
    limit $2::integer
  )
  returning j.id
), attempts as (
  delete from leasehold.job_attempts a using old where a.job_id = old.id
), steps as (
  delete from leasehold.job_steps s using old where s.job_id = old.id
), windows as (
  delete from leasehold.throttle_windows w
  where w.window_ends_at < now() or w.job_id in (select id from old)
), rate_windows as (
  delete from leasehold.rate_windows w
  where w.starts[cardinality(w.starts)] is null or w.starts[cardinality(w.starts)] < now() - w.period_ms * interval '1 millisecond'
)
select count(*)::integer as deleted from old`;

/**
 * Deletes finished jobs (and their attempts, steps and results) older than `retentionMs`, a
 * batch at a time, the throttle windows that have ended or whose job it
 * deleted (a window ends with its job), and the rate limit windows whose
 * newest start is older than their period (they hold nothing a claim
 * counts). Returns how many jobs it deleted.
 */
export async function pruneJobs(
  store: Store,
  retentionMs: number,
  options: { batchSize?: number; maxBatches?: number; onProgress?: (deleted: number) => void } = {},
): Promise<number> {
  const batchSize = options.batchSize ?? 5_000;
  let deleted = 0;
  for (let batch = 0; batch < (options.maxBatches ?? Number.POSITIVE_INFINITY); batch++) {
    const { rows } = await store.db.query<{ deleted: number }>(sql(store.schema, PRUNE_JOBS), [retentionMs, batchSize]);
    const count = rows[0]?.deleted ?? 0;
    deleted += count;
    options.onProgress?.(deleted);
    if (count < batchSize) break;
  }
  return deleted;
}

export interface ThroughputBucket {
  /** The start of the minute. */
  minute: Date;
  succeeded: number;
  failed: number;
  timeout: number;
  leaseExpired: number;
}

// One row per minute, oldest first, the current (partial) minute last. Reads
// only the attempts ended inside the window (the attempts view: job_attempts
// through its ended_at BRIN, successes through the jobs' finished_at BRIN).
// `released` attempts (given back uncharged, never run) are not counted.
const THROUGHPUT = `
with window_start as (
  select date_trunc('minute', now()) - ($1::integer - 1) * interval '1 minute' as since
), ended as (
  select date_trunc('minute', a.ended_at) as minute, a.outcome, count(*) as n
  from leasehold.attempts a, window_start w
  where a.ended_at >= w.since and a.outcome <> 'released'
  group by 1, 2
)
select m.minute,
       coalesce(sum(e.n) filter (where e.outcome = 'succeeded'), 0)::integer as succeeded,
       coalesce(sum(e.n) filter (where e.outcome = 'failed'), 0)::integer as failed,
       coalesce(sum(e.n) filter (where e.outcome = 'timeout'), 0)::integer as timeout,
       coalesce(sum(e.n) filter (where e.outcome = 'lease_expired'), 0)::integer as lease_expired
from window_start w
cross join generate_series(w.since, date_trunc('minute', now()), interval '1 minute') as m(minute)
left join ended e on e.minute = m.minute
group by m.minute
order by m.minute`;

/**
 * Attempts ended in each of the last `minutes` minutes (the current one
 * included, so far), by outcome: what the runners got through.
 */
export async function throughput(store: Store, minutes: number): Promise<ThroughputBucket[]> {
  if (!Number.isInteger(minutes) || minutes < 1 || minutes > 1440) throw new RangeError(`minutes must be an integer from 1 to 1440, got ${minutes}`);
  const { rows } = await store.db.query<{
    minute: Date; succeeded: number; failed: number; timeout: number; lease_expired: number;
  }>(sql(store.schema, THROUGHPUT), [minutes]);
  return rows.map((r) => ({
    minute: r.minute, succeeded: r.succeeded, failed: r.failed, timeout: r.timeout, leaseExpired: r.lease_expired,
  }));
}
