/**
 * Debounce and throttle on enqueue, per key (migration 0011): the rules a
 * job type's and an enqueue's `debounce` and `throttle` are held to, and the
 * two statements that enqueue such jobs. The database decides which job
 * stands, so enqueues racing on many connections agree on it.
 */
import { sql, type Store } from "../db/db.ts";
import type { EnqueuedJob, EnqueueOptions, JobType } from "./job-types.ts";
import type { Issue, Path } from "./payload.ts";
import type { Rate } from "./rate-limit.ts";
import { textProblem } from "../text.ts";

export const MAX_FLOW_KEY_LENGTH = 512;
/** The longest debounce period, maximum wait or throttle period: a year, as the longest delay. */
export const MAX_FLOW_PERIOD_MS = 365 * 24 * 3600_000;
/** A debounce without `maxWaitMs` starts at most this many periods after its job's first enqueue. */
export const DEFAULT_DEBOUNCE_MAX_WAIT_PERIODS = 10;

/** A job's debounce or throttle, resolved: the enqueue's own, else its type's. */
export interface FlowControl {
  debounceKey: string | null;
  debouncePeriodMs: number;
  /** From the job's first enqueue to its latest start. */
  debounceMaxWaitMs: number;
  throttleKey: string | null;
  throttlePeriodMs: number;
}

const NONE: FlowControl = { debounceKey: null, debouncePeriodMs: 0, debounceMaxWaitMs: 0, throttleKey: null, throttlePeriodMs: 0 };

const periodProblem = (ms: unknown) =>
  typeof ms === "number" && Number.isInteger(ms) && ms >= 1 && ms <= MAX_FLOW_PERIOD_MS ? null : `must be an integer from 1 to ${MAX_FLOW_PERIOD_MS}`;

const keyProblem = (key: unknown) =>
  typeof key !== "string" || key.length === 0 || key.length > MAX_FLOW_KEY_LENGTH
    ? `must be a string of 1 to ${MAX_FLOW_KEY_LENGTH} characters`
    : textProblem(key);

/** The default maximum wait of a debounce of `periodMs`. */
export const defaultMaxWaitMs = (periodMs: number) => Math.min(periodMs * DEFAULT_DEBOUNCE_MAX_WAIT_PERIODS, MAX_FLOW_PERIOD_MS);

/** A job type's `debounce` and `throttle` out of bounds, under `at`. */
export function flowControlIssues(type: JobType, at: Path): Issue[] {
  const issues: Issue[] = [];
  const check = (what: "debounce" | "throttle", spec: { key?: unknown; periodMs?: unknown; maxWaitMs?: unknown } | undefined) => {
    if (spec === undefined) return;
    if (typeof spec !== "object" || spec === null) {
      issues.push({ path: [...at, what], message: "must be an object with key and periodMs" });
      return;
    }
    const problem = typeof spec.key === "function" ? null : keyProblem(spec.key);
    if (problem) issues.push({ path: [...at, what, "key"], message: `${problem}, or a function of the payload` });
    const period = periodProblem(spec.periodMs);
    if (period) issues.push({ path: [...at, what, "periodMs"], message: period });
    if (spec.maxWaitMs !== undefined) {
      const wait = periodProblem(spec.maxWaitMs);
      if (wait) issues.push({ path: [...at, what, "maxWaitMs"], message: wait });
      else if (!period && (spec.maxWaitMs as number) < (spec.periodMs as number)) {
        issues.push({ path: [...at, what, "maxWaitMs"], message: "must be at least periodMs" });
      }
    }
  };
  check("debounce", type.debounce);
  check("throttle", type.throttle);
  if (type.debounce !== undefined && type.throttle !== undefined) {
    issues.push({ path: [...at, "throttle"], message: "give debounce or throttle, not both" });
  }
  return issues;
}

/** The debounce or throttle an enqueue asks for: its own when it gives either, else its type's. */
export function chosenFlowControl(type: JobType, options: EnqueueOptions): Pick<JobType, "debounce" | "throttle"> {
  const own = options.debounce !== undefined || options.throttle !== undefined;
  return own ? { debounce: options.debounce, throttle: options.throttle } : { debounce: type.debounce, throttle: type.throttle };
}

/**
 * The job's debounce or throttle: the enqueue's own (`options`, already
 * parsed) replaces its type's. A type's key function is given the payload as
 * its handler will read it; a null key means none. Returns an issue for a
 * combination that has no meaning: debounce with a start of its own, either
 * with a dedupe key.
 */
export function flowControlOf(type: JobType, payload: unknown, options: EnqueueOptions, at: Path): FlowControl | Issue {
  if (options.debounce && options.throttle) return { path: [...at, "throttle"], message: "give debounce or throttle, not both" };
  const { debounce, throttle } = chosenFlowControl(type, options);
  const keyOf = (key: string | ((payload: never) => string | null | undefined), what: string): string | null | Issue => {
    if (typeof key === "string") return key;
    const value = key(payload as never);
    if (value === null || value === undefined) return null;
    const problem = keyProblem(value);
    return problem ? { path: [...at, "payload"], message: `its ${what} key ${problem}` } : value;
  };
  let flow = NONE;
  if (debounce) {
    const key = keyOf(debounce.key, "debounce");
    if (typeof key === "object" && key !== null) return key;
    if (key !== null) {
      flow = { ...NONE, debounceKey: key, debouncePeriodMs: debounce.periodMs, debounceMaxWaitMs: debounce.maxWaitMs ?? defaultMaxWaitMs(debounce.periodMs) };
    }
  } else if (throttle) {
    const key = keyOf(throttle.key, "throttle");
    if (typeof key === "object" && key !== null) return key;
    if (key !== null) flow = { ...NONE, throttleKey: key, throttlePeriodMs: throttle.periodMs };
  }
  const what = flow.debounceKey !== null ? "debounce" : flow.throttleKey !== null ? "throttle" : null;
  if (what === null) return flow;
  if (options.dedupeKey !== undefined) {
    return { path: [...at, "dedupeKey"], message: `a ${what}d job cannot also have a dedupe key: give one of them` };
  }
  if (what === "debounce" && (options.runAt !== undefined || options.delayMs !== undefined)) {
    return { path: [...at, options.runAt !== undefined ? "runAt" : "delayMs"], message: "a debounced job starts periodMs after its last enqueue: give no runAt or delayMs" };
  }
  return flow;
}

/** What the two statements need of a validated row (shared/jobs/validate.ts `Row`). */
export interface FlowRow extends FlowControl, Rate {
  queue: string;
  name: string;
  payload: string;
  priority: number;
  runAtMs: number | null;
  delayMs: number;
  maxAttempts: number;
  leaseMs: number;
  backoffMs: number;
  group: string | null;
  fairGroup: string;
  concurrencyKey: string | null;
  concurrencyLimit: number | null;
}

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
const DEBOUNCE_JOBS = `
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
const THROTTLE_JOBS = `
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

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const identity = (name: string, key: string) => `${name}\u0000${key}`;

/**
 * The rows to write, one per key, in (name, key) order: `pick` chooses which
 * of a key's rows in the batch is written. Returns the chosen row index per key.
 */
function onePerKey(rows: readonly FlowRow[], keyOf: (r: FlowRow) => string, pick: "first" | "last"): Map<string, number> {
  const chosen = new Map<string, number>();
  rows.forEach((r, i) => {
    const id = identity(r.name, keyOf(r));
    if (pick === "last" || !chosen.has(id)) chosen.set(id, i);
  });
  return new Map(
    [...chosen].sort(([, a], [, b]) => compare(rows[a]!.name, rows[b]!.name) || compare(keyOf(rows[a]!), keyOf(rows[b]!))),
  );
}

/**
 * Enqueues debounced rows; one result per row, in row order. A batch that
 * debounces one key more than once writes the key's last row (its payload
 * and options); its first row reads as the enqueue that created the job,
 * if one was created, and the others as debounced.
 */
export async function debounceJobs(store: Store, rows: readonly FlowRow[]): Promise<EnqueuedJob[]> {
  const keyOf = (r: FlowRow) => r.debounceKey!;
  const written = onePerKey(rows, keyOf, "last");
  const todo = [...written.values()].map((i) => rows[i]!);
  const col = <K extends keyof FlowRow>(k: K) => todo.map((r) => r[k]);
  const { rows: out } = await store.db.query<{ id: string; name: string; debounce_key: string; created: boolean }>(
    sql(store.schema, DEBOUNCE_JOBS),
    [
      col("queue"), col("name"), col("payload"), col("priority"), col("maxAttempts"), col("leaseMs"), col("backoffMs"),
      col("group"), col("fairGroup"), col("concurrencyKey"), col("concurrencyLimit"), col("debounceKey"),
      col("debouncePeriodMs"), col("debounceMaxWaitMs"), col("rateKey"), col("rateLimit"), col("ratePeriodMs"),
    ],
  );
  const byKey = new Map(out.map((r) => [identity(r.name, r.debounce_key), r]));
  const firstSeen = new Set<string>();
  return rows.map((r) => {
    const id = identity(r.name, keyOf(r));
    const job = byKey.get(id);
    if (!job) throw new Error(`debounce key ${JSON.stringify(keyOf(r))} of ${r.name} was written but not returned`);
    const first = !firstSeen.has(id);
    firstSeen.add(id);
    return job.created && first ? { id: job.id, existing: false } : { id: job.id, existing: true, debounced: true };
  });
}

/**
 * Enqueues throttled rows; one result per row, in row order. A batch that
 * throttles one key more than once offers the key's first row; the others
 * are throttled by it.
 */
export async function throttleJobs(store: Store, rows: readonly FlowRow[]): Promise<EnqueuedJob[]> {
  const keyOf = (r: FlowRow) => r.throttleKey!;
  const offered = onePerKey(rows, keyOf, "first");
  const order = [...offered.values()];
  const todo = order.map((i) => rows[i]!);
  const col = <K extends keyof FlowRow>(k: K) => todo.map((r) => r[k]);
  const { rows: out } = await store.db.query<{ id: string; created: boolean }>(sql(store.schema, THROTTLE_JOBS), [
    col("queue"), col("name"), col("payload"), col("priority"), col("runAtMs"), col("delayMs"), col("maxAttempts"),
    col("leaseMs"), col("backoffMs"), col("group"), col("fairGroup"), col("concurrencyKey"), col("concurrencyLimit"),
    col("throttleKey"), col("throttlePeriodMs"), col("rateKey"), col("rateLimit"), col("ratePeriodMs"),
  ]);
  if (out.length !== order.length) throw new Error(`throttle: ${order.length} keys offered, ${out.length} returned`);
  const byRow = new Map(order.map((i, n) => [i, out[n]!]));
  const byKey = new Map(order.map((i, n) => [identity(rows[i]!.name, keyOf(rows[i]!)), out[n]!]));
  return rows.map((r, i) => {
    const mine = byRow.get(i);
    if (mine?.created) return { id: mine.id, existing: false };
    return { id: (mine ?? byKey.get(identity(r.name, keyOf(r))))!.id, existing: true, throttled: true };
  });
}
