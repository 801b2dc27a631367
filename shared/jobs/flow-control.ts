/**
 * Debounce and throttle on enqueue, per key (migration 0011): the rules a
 * job type's and an enqueue's `debounce` and `throttle` are held to, and the
 * enqueue of such jobs (its two statements are in shared/lifecycle/enqueue-sql.ts). The database decides which job
 * stands, so enqueues racing on many connections agree on it.
 */
import { sql, type Store } from "../db/db.ts";
import { DEBOUNCE_JOBS, THROTTLE_JOBS } from "../lifecycle/enqueue-sql.ts";
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

/** A debounce or throttle key: given, or its key function's answer for the payload (null: none). */
function keyOf(key: string | ((payload: never) => string | null | undefined), what: string, payload: unknown, at: Path): string | null | Issue {
  if (typeof key === "string") return key;
  const value = key(payload as never);
  if (value === null || value === undefined) return null;
  const problem = keyProblem(value);
  return problem ? { path: [...at, "payload"], message: `its ${what} key ${problem}` } : value;
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
  let flow = NONE;
  if (debounce) {
    const key = keyOf(debounce.key, "debounce", payload, at);
    if (typeof key === "object" && key !== null) return key;
    if (key !== null) {
      flow = { ...NONE, debounceKey: key, debouncePeriodMs: debounce.periodMs, debounceMaxWaitMs: debounce.maxWaitMs ?? defaultMaxWaitMs(debounce.periodMs) };
    }
  } else if (throttle) {
    const key = keyOf(throttle.key, "throttle", payload, at);
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
