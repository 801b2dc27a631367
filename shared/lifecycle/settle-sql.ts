import { chargedAttemptsSql, endsDeadSql } from "./attempt-rules.ts";
import type { Failure, Lease, Sleep, Success } from "./settle-batch.ts";

/**
 * The settle statement's text, built from one part per kind of outcome
 * (start mark, success, failure, release, sleep) and the step records, each
 * fenced by the lease (`fenced`); shared/lifecycle/settle.ts runs it.
 */

/** The channel `waitForJob` listens on; each notification's payload is the schema-qualified job id. */
export const JOB_ENDED_CHANNEL = "leasehold_job_ended";

/**
 * Notifies the end of the job `alias` when someone awaits it (and `when`
 * holds): a lateral join on the part's result, so it runs once per row and
 * only for the rows that ask. The payload is rewritten with the schema.
 */
const notifyEnd = (alias: string, when = "true", join = "left") =>
  `${join} join lateral (select pg_notify('${JOB_ENDED_CHANNEL}', 'leasehold.' || ${alias}.id::text) where ${alias}.awaited and ${when}) n on true`;

/**
 * A bound array, read through a subquery: a custom plan then guesses its
 * length as the generic plan does, so a settle of one job, too, keeps the
 * generic plan from its sixth run (bare, each was planned again).
 */
const bound = (param: string, type: string) => `(select ${param}::${type}[])`;

/**
 * A write lands only under the lease it names: the token, and an expiry not
 * yet past. Written so that no statistics can mislead its plan (migration
 * 0017, `test/plan-cost.test.ts`):
 * - A lease exists only while its job runs (constraints
 *   `jobs_running_has_lease` and `jobs_lease_only_while_running`), so the
 *   status is not checked: a status check lets the planner read
 *   `jobs_lease_idx` (partial on it), every claim's entry since the last
 *   vacuum, for a batch of a few jobs.
 * - The ids (`= any`, as well as joined) reach the batch's rows by primary
 *   key. (`any` takes them cast again: bare, `any ((select …))` would read
 *   the subquery's rows, not the array.)
 * - The expiry is compared inside `coalesce`, which the planner does not
 *   estimate from the column: statistics taken while no job ran (a queue
 *   of later jobs) call `lease_expires_at > now()` one row, and the planner
 *   then joined each of the batch's rows to the whole `unnest` (500 jobs:
 *   250,000 comparisons, 80 ms).
 */
const fenced = (ids: string) =>
  `j.id = any(${bound(ids, "bigint")}::bigint[]) and j.lease_token = s.token and coalesce(j.lease_expires_at > now(), false)`;

/** The retry-or-dead rule (shared/lifecycle/attempt-rules.ts) for a failure, permanent or not. */
const FAILURE_ENDS_DEAD = endsDeadSql("j", "s.permanent");

/**
 * The settle statement for the kinds a batch holds, composed once per
 * combination from static parts (every value a bound, cast parameter): a
 * batch of successes alone, the common case, plans in a sixth of the time
 * of the statement with every part, and runs none of the parts it would
 * leave empty. Each kind is one part: its columns (bound as arrays), its
 * update, the attempt row it records (if it ends the attempt) and what it
 * reports.
 */
export interface Part<L> {
  values: (list: readonly L[]) => unknown[];
  cte: (p: string[]) => string;
  record?: string;
  /**
   * What it reports. A part whose `result` takes its parameters reports the
   * ids it refused (fenced off), with `refused` as their kind, and the ids
   * of awaited jobs it notified; the rest of its list was written. Most
   * writes land, so the answer is a row per exception, not per job.
   */
  result: string | ((p: string[]) => string);
}

/** Rows for the ids of `ids` that the part's CTE `cte` did not change: the writes of `kind` its fence refused. */
const refusedOf = (ids: string, cte: string, kind: Kind) =>
  `select s.id::text, 'refused'::text as kind, '${kind}'::text as status from unnest(${bound(ids, "bigint")}) as s(id)
  where not exists (select 1 from ${cte} c where c.id = s.id)`;

export const leaseValues = (list: readonly Lease[]) => [ids(list), tokens(list)];

export const PARTS: { started: Part<Lease>; succeeded: Part<Success>; failed: Part<Failure>; released: Part<Lease>; slept: Part<Sleep> } = {
  started: {
    values: leaseValues,
    cte: (p) => `marked as (
  update leasehold.jobs j set handler_started = true
  from unnest(${bound(p[0]!, "bigint")}, ${bound(p[1]!, "uuid")}) as s(id, token)
  where j.id = s.id and ${fenced(p[0]!)}
  returning j.id, j.generation, j.runs
)`,
    result: (p) => refusedOf(p[0]!, "marked", "started"),
  },
  succeeded: {
    values: (list) => [ids(list), tokens(list), mostlyNull(list.map((l) => l.result ?? null)), stepLogs(list)],
    cte: (p) => `done as (
  update leasehold.jobs j
  set status = 'succeeded', finished_at = now(), lease_expires_at = null, last_error = null,
      suspect = false, owes_attempt = false, start_first = false, result = s.result::jsonb
  from unnest(${bound(p[0]!, "bigint")}, ${bound(p[1]!, "uuid")}, ${bound(p[2]!, "text")}, ${bound(p[3]!, "text")}) as s(id, token, result, steps)
  where j.id = s.id and ${fenced(p[0]!)}
  returning j.id, j.runs, j.generation, j.runner_id, j.started_at, j.awaited, s.steps
)`,
    // A success's attempt is its job row (the attempts view, migration 0014): a row only to keep a step log.
    record: `select id, runs, generation, runner_id, started_at, now(), 'succeeded'::leasehold.attempt_outcome, null::text, steps::jsonb
  from done where steps is not null`,
    result: (p) => `${refusedOf(p[0]!, "done", "succeeded")}
union all select d.id::text, 'succeeded'::text as kind, null::text as status from done d ${notifyEnd("d", "true", "inner")}`,
  },
  failed: {
    values: (list) => [
      ids(list), tokens(list), list.map((f) => f.outcome), list.map((f) => f.error),
      list.map((f) => f.retryDelayMs), list.map((f) => f.permanent ?? false), stepLogs(list),
    ],
    cte: (p) => `failed as (
  update leasehold.jobs j
  -- An attempt owed from a death that was given back is charged with this
  -- failure; and the job keeps recording its start first (its handler may
  -- have gone on to kill its runner after it was aborted).
  set attempts = ${chargedAttemptsSql("j")},
      status = (case when ${FAILURE_ENDS_DEAD} then 'dead' else 'queued' end)::leasehold.job_status,
      run_at = case when ${FAILURE_ENDS_DEAD} then j.run_at else now() + s.delay_ms * interval '1 millisecond' end,
      finished_at = case when ${FAILURE_ENDS_DEAD} then now() end,
      lease_expires_at = null, last_error = s.error, suspect = false, owes_attempt = false
  from unnest(${bound(p[0]!, "bigint")}, ${bound(p[1]!, "uuid")}, ${bound(p[2]!, "text")}, ${bound(p[3]!, "text")}, ${bound(p[4]!, "float8")}, ${bound(p[5]!, "boolean")}, ${bound(p[6]!, "text")})
    as s(id, token, outcome, error, delay_ms, permanent, steps)
  where j.id = s.id and ${fenced(p[0]!)}
  returning j.id, j.runs, j.generation, j.runner_id, j.started_at, j.status, j.awaited, s.outcome, s.error, s.steps
)`,
    record: `select id, runs, generation, runner_id, started_at, now(), outcome::leasehold.attempt_outcome, error, steps::jsonb from failed`,
    result: `select f.id::text, 'failed'::text as kind, f.status::text as status from failed f ${notifyEnd("f", "f.status = 'dead'")}`,
  },
  released: {
    values: leaseValues,
    cte: (p) => `released as (
  update leasehold.jobs j
  set status = 'queued', attempts = j.attempts - 1, lease_expires_at = null
  from unnest(${bound(p[0]!, "bigint")}, ${bound(p[1]!, "uuid")}) as s(id, token)
  where j.id = s.id and ${fenced(p[0]!)}
  returning j.id, j.runs, j.generation, j.runner_id, j.started_at
)`,
    record: `select id, runs, generation, runner_id, started_at, now(), 'released'::leasehold.attempt_outcome, null::text, null::jsonb from released`,
    result: (p) => refusedOf(p[0]!, "released", "released"),
  },
  slept: {
    values: (list) => [ids(list), tokens(list), list.map((l) => l.runAt), stepLogs(list)],
    // Like a release: the attempt is given back; the job waits for its time.
    cte: (p) => `slept as (
  update leasehold.jobs j
  set status = 'queued', attempts = j.attempts - 1, lease_expires_at = null, run_at = s.run_at
  from unnest(${bound(p[0]!, "bigint")}, ${bound(p[1]!, "uuid")}, ${bound(p[2]!, "timestamptz")}, ${bound(p[3]!, "text")}) as s(id, token, run_at, steps)
  where j.id = s.id and ${fenced(p[0]!)}
  returning j.id, j.runs, j.generation, j.runner_id, j.started_at, s.steps
)`,
    record: `select id, runs, generation, runner_id, started_at, now(), 'slept'::leasehold.attempt_outcome, null::text, steps::jsonb from slept`,
    result: (p) => refusedOf(p[0]!, "slept", "slept"),
  },
};
export type Kind = keyof typeof PARTS;
export const KINDS: readonly Kind[] = ["started", "succeeded", "failed", "released", "slept"];

/** The CTE of each kind that can carry step records: its rows are the jobs it changed (id, generation, runs). */
export const CARRIERS: Partial<Record<Kind, string>> = { started: "marked", succeeded: "done", failed: "failed", slept: "slept" };

// Jobs with step records and nothing else in the batch: held FOR SHARE until
// the records commit, so a rescue or settle waits for them, and one that
// came first leaves no row to read (fenced).
const HELD = (p: string[]) => `held as (
  select j.id, j.generation, j.runs from leasehold.jobs j
  join unnest(${bound(p[0]!, "bigint")}, ${bound(p[1]!, "uuid")}) as s(id, token) on j.id = s.id
  where ${fenced(p[0]!)}
  for share of j
)`;

// A record written again (its first write committed, its answer lost) is
// the same step of the same run: reported written, not a conflict.
const RECORD_STEPS = (p: string[], carriers: string[]) => `stepped as (
  insert into leasehold.job_steps as k (job_id, generation, seq, name, result, attempt, duration_ms)
  select c.id, c.generation, r.seq, r.name, r.result::jsonb, c.runs, r.ms
  from unnest(${bound(p[0]!, "bigint")}, ${bound(p[1]!, "integer")}, ${bound(p[2]!, "text")}, ${bound(p[3]!, "text")}, ${bound(p[4]!, "float8")}) as r(id, seq, name, result, ms)
  join (${carriers.map((c) => `select id, generation, runs from ${c}`).join(" union all ")}) c on c.id = r.id
  on conflict (job_id, generation, seq) do update set name = excluded.name
  where k.name = excluded.name and k.attempt = excluded.attempt
  returning k.job_id, k.seq
)`;

/**
 * The statement for these kinds (and, when `held` or `steps`, the jobs held
 * for their records and the records), `values` being each kind's bound
 * columns in order, then the held jobs', then the records' (their counts
 * number the parameters).
 */
const statements = new Map<string, string>();
export function settleStatement(kinds: readonly Kind[], values: readonly unknown[][], held: boolean, steps: boolean): string {
  const key = `${kinds.join(",")}${held ? "+held" : ""}${steps ? "+steps" : ""}`;
  let text = statements.get(key);
  if (text === undefined) {
    let n = 0;
    const params = (i: number) => values[i]!.map(() => `$${++n}`);
    const named = kinds.map((_, i) => params(i));
    const ctes = kinds.map((k, i) => PARTS[k].cte(named[i]!));
    if (held) ctes.push(HELD(params(kinds.length)));
    if (steps) {
      const carriers = [...kinds.flatMap((k) => CARRIERS[k] ?? []), ...(held ? ["held"] : [])];
      ctes.push(RECORD_STEPS(params(kinds.length + (held ? 1 : 0)), carriers));
    }
    const records = kinds.flatMap((k) => PARTS[k].record ?? []);
    if (records.length > 0) {
      ctes.push(`recorded as (
  insert into leasehold.job_attempts (job_id, attempt, generation, runner_id, claimed_at, ended_at, outcome, error, steps)
  ${records.join("\n  union all\n  ")}
)`);
    }
    const results = kinds.map((k, i) => {
      const result = PARTS[k].result;
      return typeof result === "string" ? result : result(named[i]!);
    });
    if (steps) results.push(`select job_id::text || '/' || seq::text as id, 'steps'::text as kind, null::text as status from stepped`);
    text = `with ${ctes.join(", ")}\n${results.join("\nunion all ")}`;
    statements.set(key, text);
  }
  return text;
}

/** An element an array literal can carry unquoted: digits, hex letters and dashes (an id, a token). */
const BARE = /^[0-9a-fA-F-]+$/;

/**
 * A list of ids or tokens as a bound array parameter: written as the array
 * literal itself (`{1,2,3}`) when every element is bare, which spares the
 * driver quoting and escaping each element (a settle carries two such
 * arrays of up to a thousand); anything else is passed as the array, for
 * the driver to quote, and the statement then refuses it as it always did.
 */
function bareArray(values: string[]): string | string[] {
  for (const v of values) if (!BARE.test(v)) return values;
  return `{${values.join(",")}}`;
}

export const ids = (leases: readonly Lease[]) => bareArray(leases.map((l) => l.id));
export const tokens = (leases: readonly Lease[]) => bareArray(leases.map((l) => l.leaseToken));
/**
 * A column of values that are mostly null (results, step logs): null when
 * all are, which `unnest` reads as a null for every row, as it pads the
 * shorter of the arrays it is given.
 */
const mostlyNull = <T,>(values: (T | null)[]) => (values.every((v) => v === null) ? null : values);
const stepLogs = (list: readonly { steps?: string | null }[]) => mostlyNull(list.map((l) => l.steps ?? null));
