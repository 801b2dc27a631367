/**
 * The claim's statement text, built once from parts; static, every value a
 * bound, cast parameter:
 *   $1 queue, $2 limit, $3 max lease ms, $4 runner id,
 *   $5 job names (null: any), $6 a group (fair: the group to start after;
 *   plain in a fair queue: the one group it showed; else null), for fair
 *   claims (else null) $7 each group's share, and for a claim under rate
 *   limits $8 how many rate-limited jobs it may take (they start at once).
 *
 * Two ways to pick candidates, then one tail that applies the concurrency
 * limits and claims. See docs/internals.md, "Fairness and limits".
 */
import { startsFirstSql } from "./attempt-rules.ts";
import { RATE_ADMIT, RATE_CLAIMED, RATE_WRITES } from "./rate-limit-sql.ts";

/**
 * The due jobs a claim may take, in the claim's order, locked, skipping those
 * another claim holds; of `group` (null: any), at most `limit`, none of
 * `skip`: one priority at a time, never reading jobs waiting for later
 * (migration 0018). $3 the longest lease, $5 the job types (null: any).
 */
const DUE_JOBS = (group: string, limit: string, suspect: boolean, rated: boolean, skip: string) =>
  `leasehold.due_jobs($1::text, ${group}, ${limit}, $3::integer, $5::text[], ${suspect}, ${rated}, ${skip})`;

const CANDIDATE_COLUMNS = (rated: boolean) =>
  `j.id, j.fair_group, j.runs, j.concurrency_key, j.concurrency_limit${rated ? ", j.rate_key, j.rate_limit, j.rate_period_ms" : ""}`;
const PICKED_COLUMNS = (rated: boolean) =>
  `p.id, p.runs, p.concurrency_key, p.concurrency_limit, p.fair_group${rated ? ", p.rate_key, p.rate_limit, p.rate_period_ms" : ""}`;

/**
 * Fair: the distinct groups with queued jobs, found by a skip scan of
 * jobs_fair_ready_idx (one probe per group: `fair_group_after`, a function
 * of migration 0015 so that the probe's plan cannot turn into a scan of the
 * queue when the table's statistics are stale) starting after $6 and wrapping
 * round, at most $2 + 1 of them: the first $2 share the claim, and the one
 * beyond tells the caller whether more than one group waits, whatever the
 * claim's size. First pass: from each sharing group's own range of that
 * index, in priority order, up to $7 rows (its share: the limit over the
 * groups the previous claim saw) that no other claimer holds. Second pass,
 * only if that fell short of the limit: the rest in plain priority order
 * (jobs_ready_idx), whatever the group. `nth` is a job's place in its group;
 * the claim takes places in turn across groups, then the second pass.
 * Every LIMIT is a parameter, so the planner's estimates stay small.
 */
const FAIR_PICK = (rated: boolean, name = "picked") => `
with recursive after_start(g) as (
  select leasehold.fair_group_after($1::text, $6::text)
  union all
  select leasehold.fair_group_after($1::text, a.g) from after_start a where a.g is not null
), up_to_start(g) as (
  select g from (select leasehold.fair_group_from($1::text, '')) f(g) where g <= $6::text
  union all
  select n.g from up_to_start u, lateral (select leasehold.fair_group_after($1::text, u.g)) n(g)
  where u.g is not null and n.g <= $6::text
), groups as (
  select listed.g, listed.turn from unnest(array(
    select g from after_start where g is not null
    union all
    select g from up_to_start where g is not null
    limit $2::integer + 1
  )) with ordinality as listed(g, turn)
), first_pass as (
  select c.*, gr.turn from groups gr cross join lateral (
    select ${CANDIDATE_COLUMNS(rated)}, row_number() over () as nth
    from ${DUE_JOBS("gr.g", "$7::integer", false, rated, "null")} j
  ) c
  where gr.turn <= $2::integer
), second_pass as (
  select p.*, $7::integer + row_number() over () as nth, 0::bigint as turn from (
    select ${CANDIDATE_COLUMNS(rated)}
    from ${DUE_JOBS("null", "$2::integer - (select count(*)::integer from first_pass)", false, rated, "array(select f.id from first_pass f)")} j
  ) p
), ${name} as (
  select ${PICKED_COLUMNS(rated)},
         row_number() over (order by p.nth, p.turn) as ord
  from (select * from first_pass union all select * from second_pass) p
  order by p.nth, p.turn
  limit $2::integer
)`;

/**
 * Whether a group other than $6 has queued jobs: two probes of
 * jobs_fair_ready_idx, the last group before $6 and the first after it
 * (functions of migration 0015, each planned as that index's ordered scan
 * whatever the statistics say), evaluated once per statement: as a scalar
 * subquery (an InitPlan), whose value an EvalPlanQual recheck keeps. Written
 * bare it was a One-Time Filter, which every recheck evaluates again: each
 * row another runner claimed since this claim's snapshot (8 runners: 0.19
 * probes a job, 0.006 as a subquery). Like the fair claim's group walk it
 * counts a group whose jobs are all delayed.
 */
const OTHER_GROUP_QUEUED = `(leasehold.fair_group_before($1::text, $6::text) is not null
        or leasehold.fair_group_after($1::text, $6::text) is not null)`;

/**
 * In priority order, whatever the group: a queue that opts out, suspects,
 * and a fair queue whose last fair claim found one group ($6). For that
 * one, nothing is picked while another group has queued jobs: the caller
 * then claims fairly at once, so a group that arrives waits no longer than
 * one claim's round trip for its share.
 */
const PLAIN_PICK = (suspect: boolean, rated: boolean, name = "picked") => `
with ${name} as (
  select ${PICKED_COLUMNS(rated)}, row_number() over () as ord
  from ${DUE_JOBS("null", `case when $6::text is null or not (select ${OTHER_GROUP_QUEUED}) then $2::integer else 0 end`, suspect, rated, "null")} p
), groups as (select null::text as g, 0::bigint as turn where $7::integer is null)`;

/**
 * Whether a suspect of this queue, that this runner could claim, waits to run
 * alone: evaluated once per claim (a look at a tiny partial index), so a
 * runner that is claiming needs no query of its own to know.
 */
const SUSPECTS_WAITING = `exists (select 1 from leasehold.jobs s
            where s.status = 'queued' and s.suspect and s.queue = $1::text and s.run_at <= now()
              and s.lease_ms <= $3::integer and ($5::text[] is null or s.name = any($5::text[])))`;

/**
 * The claim itself, over the jobs `a` it takes: the attempt and the run
 * counted (invariant 1), a fresh lease token (invariant 4), the start mark
 * cleared; `extra` narrows which of them it takes. Each row has its place
 * in the order to start them (`ord`, rising, with gaps where limits held a
 * job back); what the claim saw (the last group it shared with, how many it
 * found, whether suspects wait) is on the first row only, as a runner
 * parses every column of every row (bench/levers.md, lever 22), and the
 * queue is the caller's own. A token is 8 random bytes drawn once per
 * statement, then the job's id: unique to this claim of this job, at one
 * `gen_random_uuid()` per claim instead of one per job (each costs about
 * 3.5 µs of the database's CPU, a sixth of claiming a job).
 * The update finds its jobs by their ids as one array (one scan of the
 * primary key), and their places are joined back to the rows it returns,
 * both of the batch's size: an update joined to the picked jobs was hashed
 * against the whole table once the planner had statistics that called it
 * small (10,000 jobs: every version of every row read to update 500, half
 * the claim's time), and the array beside that join became a filter on
 * every probe on a table without statistics (bench/levers.md, lever 13).
 */
const claimUpdate = (from: "admitted" | "picked", extra: string, rated = false) => `, taken as (
  select a.id, a.ord from ${from} a where true ${extra}
), claimed as (
  update leasehold.jobs j
  set status = 'running',
      attempts = j.attempts + 1,
      runs = j.runs + 1,
      handler_started = false,
      lease_token = encode(substr(uuid_send((select gen_random_uuid())), 1, 8) || int8send(j.id), 'hex')::uuid,
      lease_expires_at = now() + j.lease_ms * interval '1 millisecond',
      runner_id = $4::text,
      started_at = now()
  where j.id = any(array(select t.id from taken t))
  returning j.id, j.name, j.payload, j.attempts, j.max_attempts, j.lease_ms, j.backoff_ms,
            j.lease_token::text, j.runs, ${startsFirstSql("j.")} as start_first${rated ? ", j.rate_key is not null as rated" : ""}
)
select c.id::text, c.name, c.payload, c.attempts, c.max_attempts, c.lease_ms, c.backoff_ms,
       c.lease_token, c.runs, c.start_first,${rated ? " c.rated," : ""} t.ord::integer,
       case when t.ord = (select min(ord) from taken) then (select g from groups where turn <= $2::integer order by turn desc limit 1) end as last_group,
       case when t.ord = (select min(ord) from taken) then (select count(*)::integer from groups) end as group_count,
       case when t.ord = (select min(ord) from taken) then ${SUSPECTS_WAITING} end as suspects_waiting
from claimed c join taken t on t.id = c.id`;

/**
 * Whether the run `h` (a job id and run number in a key's slots) still holds
 * its slot, given its job row `j`: until the row shows the run ended (`runs`
 * moved past it, or its status left `running`).
 */
const HOLDS_SLOT = (j: string, h: string) => `(${j}.runs < ${h}.run or (${j}.runs = ${h}.run and ${j}.status = 'running'))`;

/**
 * Whether job `j`'s concurrency key has no free slot now, as read from the
 * statement's snapshot (the scheduler's demand count: a job no runner could
 * claim until a slot frees is no reason to start one).
 */
export const CONCURRENCY_FULL = (j: string) => `(select count(*) from leasehold.concurrency_slots s
          cross join lateral unnest(s.job_ids, s.runs) as h(id, run)
          join leasehold.jobs x on x.id = h.id
          where s.key = ${j}.concurrency_key and ${HOLDS_SLOT("x", "h")}) >= ${j}.concurrency_limit`;

/**
 * Limits, then the claim. A picked job with a concurrency key is claimed only
 * if its key's row is locked here (SKIP LOCKED: a key another claimer is
 * admitting right now waits for the next claim) or is new and inserted here,
 * and the runs still holding the key, plus the key's jobs ahead of it in
 * this claim, leave it a slot. A run still holds its slot unless its job row
 * shows it ended (`runs` moved past it, or its status left `running`); a job
 * whose row predates that run in this statement's snapshot counts as holding:
 * the snapshot can only be behind, so it can only admit fewer. The held row
 * is rewritten with the live runs plus the new ones, in the same statement
 * as the jobs, so they cannot disagree.
 */
const CONCURRENCY_TAIL = (from: string, rated: boolean) => `, keyed as (
  select distinct concurrency_key as key from ${from} where concurrency_key is not null
), locked as (
  select s.key, s.job_ids, s.runs from leasehold.concurrency_slots s
  where s.key in (select key from keyed)
  for update skip locked
), fresh as (
  select k.key from keyed k where not exists (select 1 from leasehold.concurrency_slots s where s.key = k.key)
), live as (
  select l.key, h.id, h.run from locked l
  cross join lateral unnest(l.job_ids, l.runs) as h(id, run)
  join leasehold.jobs j on j.id = h.id
  where ${HOLDS_SLOT("j", "h")}
), admitted as (
  select p.* from (
    select p.*, row_number() over (partition by p.concurrency_key order by p.ord) as nth from ${from} p
  ) p
  where p.concurrency_key is null
     or (p.concurrency_key in (select key from locked) or p.concurrency_key in (select key from fresh))
        and p.nth + (select count(*) from live l where l.key = p.concurrency_key) <= p.concurrency_limit
), held as (
  update leasehold.concurrency_slots s
  set job_ids = coalesce((select array_agg(l.id) from live l where l.key = s.key), '{}') || n.ids,
      runs = coalesce((select array_agg(l.run) from live l where l.key = s.key), '{}') || n.runs
  from (select concurrency_key as key, array_agg(id) as ids, array_agg(runs + 1) as runs
        from admitted where concurrency_key in (select key from locked) group by 1) n
  where s.key = n.key
  returning s.key
), added as (
  insert into leasehold.concurrency_slots (key, job_ids, runs)
  select concurrency_key, array_agg(id), array_agg(runs + 1)
  from admitted where concurrency_key in (select key from fresh) group by 1 order by 1
  on conflict do nothing
  returning key
)${rated ? RATE_WRITES : ""}
${claimUpdate("admitted", `and (a.concurrency_key is null or a.concurrency_key in (select key from held union all select key from added))${rated ? RATE_CLAIMED : ""}`, rated)}`;

/**
 * The claim for a runner none of whose job types has a concurrency or a rate
 * limit: no job it can claim carries a key, so the limits' tail (a fifth of a
 * plain claim's cost, most of it planning) is left out.
 */
const UNLIMITED_TAIL = `
${claimUpdate("picked", "")}`;

/** The tail for a pick: the concurrency limits always when limited, the rate limits too when rated. */
const tail = (limited: boolean, rated: boolean) =>
  !limited ? UNLIMITED_TAIL : rated ? RATE_ADMIT + CONCURRENCY_TAIL("rate_admitted", true) : CONCURRENCY_TAIL("picked", false);

/**
 * The jobs of `due` this statement's snapshot sees: `due_jobs` locks under a
 * later snapshot of its own, and a job inserted between is not claimed (the
 * update cannot see it), so the limits must not count it: its key would hold
 * a slot for a run that never began, keeping out the job itself.
 */
const SEEN = `, unseen as (
  select array(select d.id from due d
               except all
               select v.id from leasehold.jobs v where v.id = any(array(select d.id from due d))) as ids
), picked as (select d.* from due d where d.id <> all ((select ids from unseen)::bigint[]))`;

const variants = (pick: (rated: boolean, name?: string) => string) => ({
  limited: pick(false, "due") + SEEN + tail(true, false),
  unlimited: pick(false) + tail(false, false),
  /** With rate limits (and the concurrency limits): takes $8, the rate-limited jobs it may start now. */
  rated: pick(true, "due") + SEEN + tail(true, true),
});

/**
 * The claim statements: by what is picked (fair, plain, suspects), and which
 * limits apply (none; concurrency; rate and concurrency), each its own
 * statement so a claim plans only what its runner's job types need.
 */
export const CLAIMS = {
  fair: variants(FAIR_PICK),
  plain: variants((rated, name) => PLAIN_PICK(false, rated, name)),
  suspects: variants((rated, name) => PLAIN_PICK(true, rated, name)),
} as const;
