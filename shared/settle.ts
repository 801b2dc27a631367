import { chargedAttemptsSql, endsDeadSql } from "./attempt-rules.ts";
import { sql, type Store } from "./db.ts";

/**
 * Settling ends an attempt. Every settle is fenced (invariant 4): it changes
 * only jobs still `running` under the token the caller holds, and only while
 * that lease has not expired. An id missing from the result lost its lease
 * (rescued, re-claimed, or expired) and was left untouched; the caller logs
 * it as a stale settle. A settle keeps the token on the row, so a settle that
 * committed but whose answer was lost can be recognised when it is retried
 * (`settledEarlier`); the rescuer clears the token, so a late settle after a
 * rescue is never mistaken for one of ours.
 */

export interface Lease {
  id: string;
  leaseToken: string;
}

/** A success: the handler's return value as JSON (null when it returned nothing), and its attempt's steps. */
export interface Success extends Lease {
  result?: string | null;
  /** The attempt's steps as JSON (`StepLogEntry[]`), or null when it used none. */
  steps?: string | null;
}

/** A sleep: the job goes back to `queued` until `runAt`, its attempt given back. */
export interface Sleep extends Lease {
  runAt: Date;
  steps?: string | null;
}

export interface Failure extends Lease {
  outcome: "failed" | "timeout";
  error: string;
  /** Delay before the retry, if the job has attempts left. */
  retryDelayMs: number;
  /** End the job `dead` now, whatever attempts it has left. */
  permanent?: boolean;
  steps?: string | null;
}

/**
 * A completed step's result to keep (`job_steps`), fenced by the lease it
 * ran under: `result` is its JSON (null when the step returned nothing).
 */
export interface StepRecord extends Lease {
  seq: number;
  name: string;
  result: string | null;
  durationMs: number;
}

/** How a written step record is known in `SettleResult.steps`. */
export const stepKey = (r: { id: string; seq: number }) => `${r.id}/${r.seq}`;

/** One round trip's worth of outcomes, each kind in its own list. */
export interface SettleBatch {
  /** Handlers that have started: a death now charges their attempt. */
  started?: readonly Lease[];
  succeeded?: readonly Success[];
  failed?: readonly Failure[];
  /** Claimed but never started: back to `queued`, the attempt given back. */
  released?: readonly Lease[];
  /** Handlers that chose to sleep: back to `queued` until their time, the attempt given back. */
  slept?: readonly Sleep[];
  /**
   * Step results to keep. A record rides with its job's start mark or end
   * in the same batch (written only if that is); a job with neither is
   * locked (FOR SHARE) while its record is written. Never with a release.
   */
  steps?: readonly StepRecord[];
}

/** What a settle wrote: the ids it applied, and each failed job's new status. */
export interface SettleResult {
  started: Set<string>;
  succeeded: Set<string>;
  failed: Map<string, "queued" | "dead">;
  released: Set<string>;
  slept: Set<string>;
  /** The step records written, by `stepKey`. */
  steps: Set<string>;
}

/** The channel `waitForJob` listens on; each notification's payload is the schema-qualified job id. */
export const JOB_ENDED_CHANNEL = "leasehold_job_ended";

/**
 * Notifies the end of the job `alias` when someone awaits it (and `when`
 * holds): a lateral join on the part's result, so it runs once per row and
 * only for the rows that ask. The payload is rewritten with the schema.
 */
const notifyEnd = (alias: string, when = "true") =>
  `left join lateral (select pg_notify('${JOB_ENDED_CHANNEL}', 'leasehold.' || ${alias}.id::text) where ${alias}.awaited and ${when}) n on true`;

const FENCED = `j.lease_token = s.token and j.status = 'running' and j.lease_expires_at > now()`;

/** The retry-or-dead rule (shared/attempt-rules.ts) for a failure, permanent or not. */
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
interface Part<L> {
  values: (list: readonly L[]) => unknown[];
  cte: (p: string[]) => string;
  record?: string;
  result: string;
}

const leaseValues = (list: readonly Lease[]) => [ids(list), tokens(list)];

const PARTS: { started: Part<Lease>; succeeded: Part<Success>; failed: Part<Failure>; released: Part<Lease>; slept: Part<Sleep> } = {
  started: {
    values: leaseValues,
    cte: (p) => `marked as (
  update leasehold.jobs j set handler_started = true
  from unnest(${p[0]}::bigint[], ${p[1]}::uuid[]) as s(id, token)
  where j.id = s.id and ${FENCED}
  returning j.id, j.generation, j.runs
)`,
    result: `select id::text, 'started'::text as kind, null::text as status from marked`,
  },
  succeeded: {
    values: (list) => [ids(list), tokens(list), list.map((l) => l.result ?? null), stepLogs(list)],
    cte: (p) => `done as (
  update leasehold.jobs j
  set status = 'succeeded', finished_at = now(), lease_expires_at = null, last_error = null,
      suspect = false, owes_attempt = false, start_first = false, result = s.result::jsonb
  from unnest(${p[0]}::bigint[], ${p[1]}::uuid[], ${p[2]}::text[], ${p[3]}::text[]) as s(id, token, result, steps)
  where j.id = s.id and ${FENCED}
  returning j.id, j.runs, j.generation, j.runner_id, j.started_at, j.awaited, s.steps
)`,
    record: `select id, runs, generation, runner_id, started_at, now(), 'succeeded'::leasehold.attempt_outcome, null::text, steps::jsonb from done`,
    result: `select d.id::text, 'succeeded'::text as kind, null::text as status from done d ${notifyEnd("d")}`,
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
  from unnest(${p[0]}::bigint[], ${p[1]}::uuid[], ${p[2]}::text[], ${p[3]}::text[], ${p[4]}::float8[], ${p[5]}::boolean[], ${p[6]}::text[])
    as s(id, token, outcome, error, delay_ms, permanent, steps)
  where j.id = s.id and ${FENCED}
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
  from unnest(${p[0]}::bigint[], ${p[1]}::uuid[]) as s(id, token)
  where j.id = s.id and ${FENCED}
  returning j.id, j.runs, j.generation, j.runner_id, j.started_at
)`,
    record: `select id, runs, generation, runner_id, started_at, now(), 'released'::leasehold.attempt_outcome, null::text, null::jsonb from released`,
    result: `select id::text, 'released'::text as kind, null::text as status from released`,
  },
  slept: {
    values: (list) => [ids(list), tokens(list), list.map((l) => l.runAt), stepLogs(list)],
    // Like a release: the attempt is given back; the job waits for its time.
    cte: (p) => `slept as (
  update leasehold.jobs j
  set status = 'queued', attempts = j.attempts - 1, lease_expires_at = null, run_at = s.run_at
  from unnest(${p[0]}::bigint[], ${p[1]}::uuid[], ${p[2]}::timestamptz[], ${p[3]}::text[]) as s(id, token, run_at, steps)
  where j.id = s.id and ${FENCED}
  returning j.id, j.runs, j.generation, j.runner_id, j.started_at, s.steps
)`,
    record: `select id, runs, generation, runner_id, started_at, now(), 'slept'::leasehold.attempt_outcome, null::text, steps::jsonb from slept`,
    result: `select id::text, 'slept'::text as kind, null::text as status from slept`,
  },
};
type Kind = keyof typeof PARTS;
const KINDS: readonly Kind[] = ["started", "succeeded", "failed", "released", "slept"];

/** The CTE of each kind that can carry step records: its rows are the jobs it changed (id, generation, runs). */
const CARRIERS: Partial<Record<Kind, string>> = { started: "marked", succeeded: "done", failed: "failed", slept: "slept" };

// Jobs with step records and nothing else in the batch: held FOR SHARE until
// the records commit, so a rescue or settle waits for them, and one that
// came first leaves no row to read (fenced).
const HELD = (p: string[]) => `held as (
  select j.id, j.generation, j.runs from leasehold.jobs j
  join unnest(${p[0]}::bigint[], ${p[1]}::uuid[]) as s(id, token) on j.id = s.id
  where ${FENCED}
  for share of j
)`;

// A record written again (its first write committed, its answer lost) is
// the same step of the same run: reported written, not a conflict.
const RECORD_STEPS = (p: string[], carriers: string[]) => `stepped as (
  insert into leasehold.job_steps as k (job_id, generation, seq, name, result, attempt, duration_ms)
  select c.id, c.generation, r.seq, r.name, r.result::jsonb, c.runs, r.ms
  from unnest(${p[0]}::bigint[], ${p[1]}::integer[], ${p[2]}::text[], ${p[3]}::text[], ${p[4]}::float8[]) as r(id, seq, name, result, ms)
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
function settleStatement(kinds: readonly Kind[], values: readonly unknown[][], held: boolean, steps: boolean): string {
  const key = `${kinds.join(",")}${held ? "+held" : ""}${steps ? "+steps" : ""}`;
  let text = statements.get(key);
  if (text === undefined) {
    let n = 0;
    const params = (i: number) => values[i]!.map(() => `$${++n}`);
    const ctes = kinds.map((k, i) => PARTS[k].cte(params(i)));
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
    const results = kinds.map((k) => PARTS[k].result);
    if (steps) results.push(`select job_id::text || '/' || seq::text as id, 'steps'::text as kind, null::text as status from stepped`);
    text = `with ${ctes.join(", ")}\n${results.join("\nunion all ")}`;
    statements.set(key, text);
  }
  return text;
}

/**
 * Writes a batch of outcomes in one statement (one round trip, one commit):
 * start marks, successes, failures (each back to `queued` after its retry
 * delay, or `dead` when it was the last attempt or `permanent`), releases,
 * sleeps, and step records. Every ended attempt gets its row. An id may
 * appear in one outcome list only (and in `steps` besides, not with a
 * release).
 */
export async function settleJobs(store: Store, batch: SettleBatch): Promise<SettleResult> {
  const lists = {
    started: batch.started ?? [], succeeded: batch.succeeded ?? [], failed: batch.failed ?? [], released: batch.released ?? [],
    slept: batch.slept ?? [],
  };
  const result: SettleResult = {
    started: new Set(), succeeded: new Set(), failed: new Map(), released: new Set(), slept: new Set(), steps: new Set(),
  };
  const kinds = KINDS.filter((k) => lists[k].length > 0);
  const records = batch.steps ?? [];
  // A record rides with its job's part; a job that has none here is held for it.
  const carried = new Set(kinds.filter((k) => CARRIERS[k]).flatMap((k) => lists[k].map((l) => l.id)));
  const held = [...new Map(records.filter((r) => !carried.has(r.id)).map((r) => [r.id, r])).values()];
  if (kinds.length === 0 && records.length === 0) return result;
  const values = kinds.map((k) => (PARTS[k] as Part<Lease>).values(lists[k]));
  if (held.length > 0) values.push(leaseValues(held));
  if (records.length > 0) {
    values.push([ids(records), records.map((r) => r.seq), records.map((r) => r.name), records.map((r) => r.result), records.map((r) => r.durationMs)]);
  }
  const { rows } = await store.db.query<{ id: string; kind: keyof SettleResult; status: "queued" | "dead" | null }>(
    sql(store.schema, settleStatement(kinds, values, held.length > 0, records.length > 0)), values.flat(),
  );
  for (const r of rows) {
    if (r.kind === "failed") result.failed.set(r.id, r.status!);
    else result[r.kind].add(r.id);
  }
  return result;
}

const ids = (leases: readonly Lease[]) => leases.map((l) => l.id);
const tokens = (leases: readonly Lease[]) => leases.map((l) => l.leaseToken);
const stepLogs = (list: readonly { steps?: string | null }[]) => list.map((l) => l.steps ?? null);

const SETTLED_EARLIER = `
select j.id::text, j.status::text from leasehold.jobs j
join unnest($1::bigint[], $2::uuid[]) as s(id, token) on j.id = s.id
where j.lease_token = s.token and j.status <> 'running'`;

/**
 * Of these leases, the ones a settle of ours already ended (their answer may
 * have been lost with the connection), with the status it left. Asked only
 * when a settle is retried.
 */
export async function settledEarlier(store: Store, leases: readonly Lease[]): Promise<Map<string, string>> {
  if (leases.length === 0) return new Map();
  const { rows } = await store.db.query<{ id: string; status: string }>(sql(store.schema, SETTLED_EARLIER), [
    ids(leases), tokens(leases),
  ]);
  return new Map(rows.map((r) => [r.id, r.status]));
}

/** Marks jobs succeeded and records their attempts (and results). Returns the ids it completed. */
export async function completeJobs(store: Store, leases: readonly Success[]): Promise<Set<string>> {
  return (await settleJobs(store, { succeeded: leases })).succeeded;
}

/** Records failed or timed-out attempts. Returns the new status of each job it changed. */
export async function failJobs(store: Store, failures: readonly Failure[]): Promise<Map<string, "queued" | "dead">> {
  return (await settleJobs(store, { failed: failures })).failed;
}

/** Gives jobs back without charging the attempt. Returns the ids released. */
export async function releaseJobs(store: Store, leases: readonly Lease[]): Promise<Set<string>> {
  return (await settleJobs(store, { released: leases })).released;
}

const EXTEND_LEASE = `
update leasehold.jobs
set lease_expires_at = now() + $3::integer * interval '1 millisecond'
where id = $1::bigint and lease_token = $2::uuid and status = 'running' and lease_expires_at > now()
returning lease_expires_at`;

/**
 * Extends a valid lease to `leaseMs` from now. Returns the new expiry, or
 * null if the lease was already lost or expired.
 */
export async function extendLease(store: Store, lease: Lease, leaseMs: number): Promise<Date | null> {
  const { rows } = await store.db.query<{ lease_expires_at: Date }>(sql(store.schema, EXTEND_LEASE), [
    lease.id,
    lease.leaseToken,
    Math.floor(leaseMs),
  ]);
  return rows[0]?.lease_expires_at ?? null;
}
