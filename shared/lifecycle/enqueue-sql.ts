import { startsFirstSql } from "./attempt-rules.ts";

/** The channel runners waiting for work listen on (shared/runner/bell.ts); the payload is the schema-qualified queue. */
export const JOB_READY_CHANNEL = "leasehold_job_ready";

/**
 * The bell (migration 0016): a notification for each queue of `inserted`
 * with a job due now that a waiting runner listens for. With no listener
 * row at all the one-time filter skips the rest, so an enqueue nobody
 * waits on takes no notify lock at its commit. Evaluated once, as the
 * filter `RUNG` of the statement's result; the payload is rewritten with
 * the schema.
 */
const RING = `, rung as (
  select count(pg_notify('${JOB_READY_CHANNEL}', 'leasehold.' || b.queue)) as n
  from (select distinct i.queue from inserted i
        where i.run_at <= now() and exists (select 1 from leasehold.listeners where expires_at > now())) b
  where exists (select 1 from leasehold.listeners l where b.queue = any(l.queues) and l.expires_at > now())
)`;
const RUNG = "(select n from rung) >= 0";

/**
 * The enqueue's transitions: a job comes into being `queued` (a plain
 * insert, one with a dedupe key, a debounced or a throttled one), or
 * `running`, claimed by the runner that enqueues it (`INSERT_CLAIMED`).
 * shared/jobs/ validates and picks the statement; these are the writes.
 */

/**
 * Rows are inserted in the order given (`i`): a deduplicated batch relies on it to take its keys in order.
 * The payloads come as one JSON array ($3), each element the payload's JSON
 * as validated: written by joining them, with nothing to quote or escape
 * (a text[] literal escapes every quote of every payload).
 */
const COLUMNS = `
insert into leasehold.jobs
  (queue, name, payload, priority, run_at, max_attempts, lease_ms, backoff_ms, group_key, dedupe_key,
   fair_group, concurrency_key, concurrency_limit, rate_key, rate_limit, rate_period_ms)
select q, n, p::jsonb, pr, coalesce(to_timestamp(ra / 1000), now() + d * interval '1 millisecond'), ma, lm, bm, g, dk, fg, ck, cl,
       rk, rl, rp
from unnest($1::text[], $2::text[], array(select e from json_array_elements($3::json) with ordinality as x(e, o) order by o),
            $4::smallint[], $5::float8[], $6::float8[], $7::integer[], $8::integer[], $9::integer[], $10::text[], $11::text[],
            $12::text[], $13::text[], $14::integer[], $15::text[], $16::integer[], $17::integer[]) with ordinality
  as t(q, n, p, pr, ra, d, ma, lm, bm, g, dk, fg, ck, cl, rk, rl, rp, i)
order by i`;

/**
 * Without dedupe keys there can be no conflict, and no speculative insertion
 * to pay for. The ids come back as one text, in the order given: each row's
 * id is drawn as it is inserted, in that order, so they ascend with it. One
 * row back, not one per job: node-postgres reads each row it receives into
 * an object, 6 ms of a 10,000-job batch.
 */
export const INSERT_JOBS = `
with inserted as (${COLUMNS}
  returning id, queue, run_at
)${RING}
select string_agg(id::text, ',' order by id) as ids from inserted where ${RUNG}`;

/**
 * One job without a dedupe key, the commonest enqueue (a route's): the same
 * columns and values as a batch of one, as plain parameters. Half the time of
 * the batch statement for one row in a freshly created table (0.8 against
 * 1.7-2.1 ms), where the planner has no statistics yet.
 */
export const INSERT_ONE = `
with inserted as (
insert into leasehold.jobs
  (queue, name, payload, priority, run_at, max_attempts, lease_ms, backoff_ms, group_key, dedupe_key,
   fair_group, concurrency_key, concurrency_limit, rate_key, rate_limit, rate_period_ms)
values ($1::text, $2::text, $3::jsonb, $4::smallint,
        coalesce(to_timestamp($5::float8 / 1000), now() + $6::float8 * interval '1 millisecond'),
        $7::integer, $8::integer, $9::integer, $10::text, $11::text, $12::text, $13::text, $14::integer,
        $15::text, $16::integer, $17::integer)
returning id, queue, run_at
)${RING}
select id::text from inserted where ${RUNG}`;

/** A key already pending is skipped, never written to: its runner must not wait on our transaction. */
export const INSERT_JOBS_DEDUPED = `
with inserted as (${COLUMNS}
  on conflict (name, dedupe_key) where dedupe_key is not null and status in ('queued', 'running')
  do nothing
  returning id, name, dedupe_key, queue, run_at
)${RING}
select id::text, name, dedupe_key from inserted where ${RUNG}`;

/** The row of the insert that is a claim: attempt 1 counted, a fresh lease token and expiry, the runner's id. */
const CLAIMED_ROW = `$1::text, $2::text, $3::jsonb, $4::smallint, $5::integer, $6::integer, $7::integer, $8::text, $10::text,
   'running', 1, 1, gen_random_uuid(), now() + $6::integer * interval '1 millisecond', $9::text, now()`;

/** The insert that is a claim, of the claimed row `rows` gives (`values (...)` or a `select`). */
const claimedInsert = (rows: string) => `insert into leasehold.jobs
  (queue, name, payload, priority, max_attempts, lease_ms, backoff_ms, group_key, fair_group,
   status, attempts, runs, lease_token, lease_expires_at, runner_id, started_at)
${rows}
returning id::text, queue, name, payload, attempts, runs, ${startsFirstSql()} as start_first, max_attempts, lease_ms, backoff_ms,
  lease_token::text`;

/** The insert that is a claim (`enqueueClaimed`). */
export const INSERT_CLAIMED = `
${claimedInsert(`values (${CLAIMED_ROW})`)}`;

/**
 * Several inserts that are claims in one statement (follow-ups handed off
 * together, shared/runner/follow.ts): the claimed row of each, its columns
 * as arrays in `INSERT_CLAIMED`'s places (payloads as one JSON array), the
 * runner $9.
 * Inserted in the order given, so their ids ascend with it.
 */
export const INSERT_CLAIMED_MANY = `
${claimedInsert(`select q, n, p::jsonb, pr, ma, lm, bm, g, fg,
   'running', 1, 1, gen_random_uuid(), now() + lm * interval '1 millisecond', $9::text, now()
from unnest($1::text[], $2::text[], array(select e from json_array_elements($3::json) with ordinality as x(e, o) order by o),
            $4::smallint[], $5::integer[], $6::integer[], $7::integer[], $8::text[], $10::text[]) with ordinality
  as t(q, n, p, pr, ma, lm, bm, g, fg, i)
order by i`)}`;

/**
 * A follow-up job a runner may start itself (`enqueueFollowUp`): inserted
 * claimed by it as `INSERT_CLAIMED` does, unless a job waits ahead of it that
 * the runner could claim instead: a ready queued job of its queue, of at
 * least its priority (the claim's order is priority, then run_at, then id,
 * so every such job comes first), of a type the runner knows ($12) and a
 * lease it can take ($11), as the claim's own filter reads them. Then it is
 * inserted queued, as `INSERT_ONE` inserts a job to run now, in the same
 * statement. One row: `claimed` says which.
 */
export const INSERT_FOLLOW_UP = `
with ahead as (
  select exists (
    select 1 from leasehold.jobs a
    where a.status = 'queued' and a.queue = $1::text and a.priority >= $4::smallint and a.run_at <= now()
      and a.lease_ms <= $11::integer and a.name = any($12::text[])
  ) as waiting
), claimed as (
${claimedInsert(`select ${CLAIMED_ROW}\nfrom ahead where not ahead.waiting`)}
), queued as (
  insert into leasehold.jobs (queue, name, payload, priority, max_attempts, lease_ms, backoff_ms, group_key, fair_group)
  select $1::text, $2::text, $3::jsonb, $4::smallint, $5::integer, $6::integer, $7::integer, $8::text, $10::text
  from ahead where ahead.waiting
  returning id, queue, run_at
), inserted as (select * from queued)${RING}
select c.*, true as claimed from claimed c
union all
select q.id::text, null, null, null, null, null, null, null, null, null, null, false from queued q where ${RUNG}`;

/**
 * Inserts each row's job, or, where its key already has a job no runner has
 * claimed, updates that job instead (the unique index jobs_debounce_idx is
 * the arbiter, and its row lock queues concurrent enqueues of a key): the
 * new payload and options, the start moved to `periodMs` after this
 * enqueue but never earlier than it was nor past the first enqueue's
 * deadline. A job being claimed meanwhile leaves the index when its claim
 * commits, and this enqueue then inserts a new one. Rows arrive one per key,
 * in (name, key) order, so batches sharing keys lock them in one order.
 * Times are the transaction's now(), as every enqueue's run_at is.
 */
export const DEBOUNCE_JOBS = `
insert into leasehold.jobs as j
  (queue, name, payload, priority, run_at, max_attempts, lease_ms, backoff_ms, group_key,
   fair_group, concurrency_key, concurrency_limit, debounce_key, debounce_deadline, rate_key, rate_limit, rate_period_ms)
select q, n, p::jsonb, pr, now() + pm * interval '1 millisecond', ma, lm, bm, g,
       fg, ck, cl, dk, now() + mw * interval '1 millisecond', rk, rl, rp
from unnest($1::text[], $2::text[], $3::text[], $4::smallint[], $5::integer[], $6::integer[], $7::integer[], $8::text[],
            $9::text[], $10::text[], $11::integer[], $12::text[], $13::float8[], $14::float8[],
            $15::text[], $16::integer[], $17::integer[]) with ordinality
  as t(q, n, p, pr, ma, lm, bm, g, fg, ck, cl, dk, pm, mw, rk, rl, rp, i)
order by i
on conflict (name, debounce_key) where debounce_key is not null and status = 'queued' and runs = 0
do update set
  queue = excluded.queue, payload = excluded.payload, priority = excluded.priority, max_attempts = excluded.max_attempts,
  lease_ms = excluded.lease_ms, backoff_ms = excluded.backoff_ms, group_key = excluded.group_key,
  fair_group = excluded.fair_group, concurrency_key = excluded.concurrency_key, concurrency_limit = excluded.concurrency_limit,
  rate_key = excluded.rate_key, rate_limit = excluded.rate_limit, rate_period_ms = excluded.rate_period_ms,
  run_at = greatest(j.run_at, least(excluded.run_at, j.debounce_deadline))
returning j.id::text, j.name, j.debounce_key, j.xmax = 0 as created`;

/**
 * Opens a throttle window for each row whose key has none open, with the
 * row's own job, and returns the job standing in each key's window. The
 * upsert on throttle_windows locks the key's row, so concurrent enqueues of
 * a key take turns: the first opens the window, the others find it open.
 * Job ids are drawn first, so the window row can name its job in the same
 * statement; a throttled row's id is never used. One row per key, in
 * (name, key) order.
 */
export const THROTTLE_JOBS = `
with r as materialized (
  select t.*, nextval(pg_get_serial_sequence('leasehold.jobs', 'id')) as new_id
  from unnest($1::text[], $2::text[], $3::text[], $4::smallint[], $5::float8[], $6::float8[], $7::integer[], $8::integer[],
              $9::integer[], $10::text[], $11::text[], $12::text[], $13::integer[], $14::text[], $15::float8[],
              $16::text[], $17::integer[], $18::integer[]) with ordinality
    as t(q, n, p, pr, ra, d, ma, lm, bm, g, fg, ck, cl, tk, pm, rk, rl, rp, i)
), w as (
  insert into leasehold.throttle_windows as w (name, key, job_id, window_ends_at)
  select n, tk, new_id, now() + pm * interval '1 millisecond' from r order by i
  on conflict (name, key) do update set
    job_id = case when w.window_ends_at <= now() then excluded.job_id else w.job_id end,
    window_ends_at = case when w.window_ends_at <= now() then excluded.window_ends_at else w.window_ends_at end
  returning w.name, w.key, w.job_id
), created as (
  insert into leasehold.jobs
    (id, queue, name, payload, priority, run_at, max_attempts, lease_ms, backoff_ms, group_key,
     fair_group, concurrency_key, concurrency_limit, rate_key, rate_limit, rate_period_ms)
  overriding system value
  select r.new_id, q, n, p::jsonb, pr, coalesce(to_timestamp(ra / 1000), now() + d * interval '1 millisecond'), ma, lm, bm, g,
         fg, ck, cl, rk, rl, rp
  from r join w on w.job_id = r.new_id
  order by r.i
  returning id
)
select w.job_id::text as id, w.job_id = r.new_id as created
from r join w on w.name = r.n and w.key = r.tk
order by r.i`;
