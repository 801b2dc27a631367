import type { z } from "zod";
import { jsonArray, numberArray, textArray } from "../db/arrays.ts";
import { hotQuery, sql, type Store } from "../db/db.ts";
import { INSERT_CLAIMED, INSERT_CLAIMED_MANY, INSERT_FOLLOW_UP, INSERT_JOBS, INSERT_JOBS_DEDUPED, INSERT_ONE } from "../lifecycle/enqueue-sql.ts";
import { ValidationError } from "../errors.ts";
import type { EnqueuedJob, EnqueueOptions, JobType } from "./job-types.ts";
import { toClaimed, type ClaimedJob, type ClaimedRow } from "../lifecycle/claim.ts";
import { dedupeIdentity, toRows, type EnqueueLimits, type Row } from "./validate.ts";
import { debounceJobs, throttleJobs } from "./flow-control.ts";

export { enqueueOptionsSchema, type EnqueueLimits } from "./validate.ts";

/** One job to enqueue: its type, its payload typed by the type's schema, options. */
export interface JobSpec<S extends z.ZodType = z.ZodType> {
  type: JobType<S>;
  payload: z.input<S>;
  options?: EnqueueOptions;
}

/** Builds a `JobSpec` with the payload type inferred from the job type. */
export function job<S extends z.ZodType>(type: JobType<S>, payload: z.input<S>, options?: EnqueueOptions): JobSpec<S> {
  return { type, payload, options };
}


const PENDING_JOBS = `
select j.id::text, j.name, j.dedupe_key
from unnest($1::text[], $2::text[]) as k(n, dk)
join leasehold.jobs j on j.name = k.n and j.dedupe_key = k.dk
where j.dedupe_key is not null and j.status in ('queued', 'running')`;

/**
 * A key is skipped as pending, then its pending job is gone before it is read:
 * try again. Each round needs a job with that key to finish in between.
 */
const MAX_DEDUPE_ROUNDS = 10;

/** How a batch sends a column: text and numbers as array literals, payloads as one JSON array (shared/db/arrays.ts). */
const TEXT = (column: readonly unknown[]) => textArray(column as readonly (string | null)[]);
const NUMBER = (column: readonly unknown[]) => numberArray(column as readonly (number | null)[]);
const JSON_TEXT = (column: readonly unknown[]) => jsonArray(column as readonly string[]);

/** INSERT_JOBS' parameters in order ($1 to $17), each with how a batch sends it; INSERT_ONE takes the same, one value each. */
const COLUMNS: readonly (readonly [keyof Row, (column: readonly unknown[]) => string])[] = [
  ["queue", TEXT], ["name", TEXT], ["payload", JSON_TEXT], ["priority", NUMBER], ["runAtMs", NUMBER], ["delayMs", NUMBER],
  ["maxAttempts", NUMBER], ["leaseMs", NUMBER], ["backoffMs", NUMBER], ["group", TEXT], ["dedupeKey", TEXT],
  ["fairGroup", TEXT], ["concurrencyKey", TEXT], ["concurrencyLimit", NUMBER],
  ["rateKey", TEXT], ["rateLimit", NUMBER], ["ratePeriodMs", NUMBER],
];

/** One row as INSERT_ONE's parameters. */
const values = (r: Row) => COLUMNS.map(([k]) => r[k]);

/** The rows as INSERT_JOBS' parameters: one literal per column. */
const columns = (rows: readonly Row[]) => COLUMNS.map(([k, send]) => send(rows.map((r) => r[k])));

/**
 * Row indexes in the one order every batch takes dedupe keys in, by
 * (name, dedupe key), rows without a key last: two batches sharing keys then
 * cannot each hold one the other waits for.
 */
function canonicalOrder(rows: readonly Row[]): number[] {
  const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return rows
    .map((_, i) => i)
    .sort((a, b) => {
      const x = rows[a]!;
      const y = rows[b]!;
      if (x.dedupeKey === null || y.dedupeKey === null) return x.dedupeKey === null ? (y.dedupeKey === null ? a - b : 1) : -1;
      return compare(x.name, y.name) || compare(x.dedupeKey, y.dedupeKey);
    });
}

/**
 * Inserts rows with dedupe keys, skipping keys already pending, then reads the
 * pending jobs of the skipped keys; a key whose pending job finished between
 * the two is inserted again. Returns one result per row, in row order.
 */
async function insertDeduped(store: Store, rows: readonly Row[]): Promise<EnqueuedJob[]> {
  const results: EnqueuedJob[] = new Array(rows.length);
  let todo = canonicalOrder(rows);
  for (let round = 0; todo.length > 0; round++) {
    if (round === MAX_DEDUPE_ROUNDS) throw new Error(`dedupe keys kept changing hands: gave up after ${round} rounds`);
    const { rows: inserted } = await hotQuery<{ id: string; name: string; dedupe_key: string | null }>(
      store, sql(store.schema, INSERT_JOBS_DEDUPED),
      columns(todo.map((i) => rows[i]!)),
    );
    const insertedByKey = new Map<string, string>();
    // Rows without a key are never skipped; they come last, in order.
    const keyless: string[] = [];
    let nextKeyless = 0;
    for (const r of inserted) {
      if (r.dedupe_key === null) keyless.push(r.id);
      else insertedByKey.set(dedupeIdentity(r.name, r.dedupe_key), r.id);
    }
    const skipped: number[] = [];
    for (const i of todo) {
      const { name, dedupeKey } = rows[i]!;
      const id = dedupeKey === null ? keyless[nextKeyless++] : insertedByKey.get(dedupeIdentity(name, dedupeKey));
      if (id !== undefined) results[i] = { id, existing: false };
      else skipped.push(i);
    }
    if (skipped.length === 0) break;
    const { rows: pending } = await store.db.query<{ id: string; name: string; dedupe_key: string }>(
      sql(store.schema, PENDING_JOBS),
      [skipped.map((i) => rows[i]!.name), skipped.map((i) => rows[i]!.dedupeKey)],
    );
    const pendingByKey = new Map(pending.map((r) => [dedupeIdentity(r.name, r.dedupe_key), r.id]));
    todo = skipped.filter((i) => {
      const id = pendingByKey.get(dedupeIdentity(rows[i]!.name, rows[i]!.dedupeKey!));
      if (id !== undefined) results[i] = { id, existing: true };
      return id === undefined;
    });
  }
  return results;
}

/**
 * Enqueues many jobs, in one statement when no dedupe key is already pending.
 * Every spec is validated first (see shared/jobs/validate.ts); if any is bad, a
 * ValidationError names the field and nothing is written. Pass a transaction
 * client as `store.db` to enqueue inside it. A job whose dedupe key matches a
 * pending job returns that job with `existing: true`, without writing to it.
 * A debounced or throttled job returns the job that stands for its key
 * (`existing` and `debounced` or `throttled`; see `Debounce`, `Throttle`).
 * Results are in the order of `specs`. `limits` adds the deployment's rules:
 * which queues are served, and the payload size limit. A batch whose keys
 * are pending takes a second statement (a third if one finished meanwhile):
 * enqueue inside a transaction to make such a batch all or nothing.
 */
export async function enqueueJobs(store: Store, specs: readonly JobSpec<any>[], limits?: EnqueueLimits): Promise<EnqueuedJob[]> {
  const rows = toRows(specs, limits);
  if (rows.length === 0) return [];
  if (rows.some((r) => r.debounceKey !== null || r.throttleKey !== null)) return insertFlowControlled(store, rows);
  return insertRows(store, rows);
}

/**
 * A batch with debounced or throttled rows: those first (debounce, then
 * throttle, each in key order, so batches lock keys in one order), then the
 * rest. One statement per kind: enqueue inside a transaction to make such a
 * batch all or nothing.
 */
async function insertFlowControlled(store: Store, rows: readonly Row[]): Promise<EnqueuedJob[]> {
  const results: EnqueuedJob[] = new Array(rows.length);
  const kinds = [
    { pick: (r: Row) => r.debounceKey !== null, write: debounceJobs },
    { pick: (r: Row) => r.throttleKey !== null, write: throttleJobs },
    { pick: (r: Row) => r.debounceKey === null && r.throttleKey === null, write: insertRows },
  ];
  for (const { pick, write } of kinds) {
    const at = rows.flatMap((r, i) => (pick(r) ? [i] : []));
    if (at.length === 0) continue;
    const written = await write(store, at.map((i) => rows[i]!));
    at.forEach((i, n) => (results[i] = written[n]!));
  }
  return results;
}

/** Rows without debounce or throttle. */
async function insertRows(store: Store, rows: readonly Row[]): Promise<EnqueuedJob[]> {
  if (rows.some((r) => r.dedupeKey !== null)) return insertDeduped(store, rows);
  if (rows.length === 1) {
    const { rows: written } = await hotQuery<{ id: string }>(store, sql(store.schema, INSERT_ONE), values(rows[0]!));
    return [{ id: written[0]!.id, existing: false }];
  }
  const { rows: [written] } = await hotQuery<{ ids: string }>(store, sql(store.schema, INSERT_JOBS), columns(rows));
  return written!.ids.split(",").map((id) => ({ id, existing: false }));
}


/**
 * Enqueues one job already claimed by `runnerId`: the insert is the claim
 * (attempt 1 counted, a fresh lease token, the lease expiry, the runner id),
 * so a runner can start a follow-up job without a claim round trip. Only for
 * a job to run now, without a dedupe key, a concurrency or a rate limit
 * (only the claim admits those). Validated as `enqueueJobs` validates.
 */
export async function enqueueClaimed(store: Store, spec: JobSpec<any>, runnerId: string, limits?: EnqueueLimits): Promise<ClaimedJob> {
  const [claimed] = await insertClaimed(store, [claimableRow(spec, limits)], runnerId);
  return claimed!;
}

/**
 * Inserts rows `claimableRow` validated, each claimed by `runnerId` as
 * `enqueueClaimed` claims one, in one statement; the claimed jobs in the
 * order given.
 */
export async function insertClaimed(store: Store, rows: readonly Row[], runnerId: string): Promise<ClaimedJob[]> {
  if (rows.length === 1) {
    const { rows: [one] } = await hotQuery<ClaimedRow>(store, sql(store.schema, INSERT_CLAIMED), claimedValues(rows[0]!, runnerId));
    return [toClaimed(one!)];
  }
  const { rows: written } = await hotQuery<ClaimedRow>(store, sql(store.schema, INSERT_CLAIMED_MANY), [
    ...CLAIMED_COLUMNS.map(([k, send]) => send(rows.map((r) => r[k]))), runnerId, TEXT(rows.map((r) => r.fairGroup)),
  ]);
  // Ids are drawn in the order the rows were inserted, which is the order given.
  return written.map((r) => toClaimed(r)).sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
}

/**
 * A claimed insert's columns ($1 to $8; the runner is $9 and the fair group
 * $10), as `COLUMNS` has them: one value each for INSERT_CLAIMED and
 * INSERT_FOLLOW_UP, one array each for INSERT_CLAIMED_MANY.
 */
const CLAIMED = new Set<keyof Row>(["queue", "name", "payload", "priority", "maxAttempts", "leaseMs", "backoffMs", "group"]);
const CLAIMED_COLUMNS = COLUMNS.filter(([k]) => CLAIMED.has(k));

/** A job's row, validated, if a runner may claim it as it is enqueued: one to run now, with no key and no limit. */
export function claimableRow(spec: JobSpec<any>, limits?: EnqueueLimits): Row {
  const [row] = toRows([spec], limits) as [Row];
  const refused = row.runAtMs !== null ? "runAt" : row.delayMs > 0 ? "delayMs" : row.dedupeKey !== null ? "dedupeKey"
    : row.concurrencyKey !== null ? "concurrency" : row.rateKey !== null ? "rateLimit" : row.debounceKey !== null ? "debounce" : row.throttleKey !== null ? "throttle" : null;
  if (refused) {
    throw new ValidationError(`enqueueClaimed takes only jobs to run now, without a dedupe key, a concurrency or rate limit, a debounce or a throttle: ${refused} given`, [
      { path: [refused], message: "a job claimed as it is enqueued must run now, without a dedupe key, a concurrency or rate limit, a debounce or a throttle" },
    ]);
  }
  return row;
}

/** A claimed insert's parameters ($1 to $10 of INSERT_CLAIMED and INSERT_FOLLOW_UP). */
const claimedValues = (row: Row, runnerId: string) => [...CLAIMED_COLUMNS.map(([k]) => row[k]), runnerId, row.fairGroup];

/** What a runner could claim: the job types it knows and the longest lease it can take. */
export interface Claimable {
  names: readonly string[];
  maxLeaseMs: number;
}

/**
 * A follow-up job a runner may start itself, in one statement: inserted
 * claimed by `runnerId` (as `enqueueClaimed`) when no job it could claim
 * (`claimable`) waits ahead of it in its queue, else inserted queued, as
 * `enqueue` would. The same jobs only as `enqueueClaimed` takes.
 */
export async function enqueueFollowUp(
  store: Store, spec: JobSpec<any>, runnerId: string, claimable: Claimable, limits?: EnqueueLimits,
): Promise<{ claimed: ClaimedJob } | { queued: EnqueuedJob }> {
  const row = claimableRow(spec, limits);
  const { rows } = await hotQuery<ClaimedRow & { claimed: boolean }>(store, sql(store.schema, INSERT_FOLLOW_UP), [
    ...claimedValues(row, runnerId), Math.floor(Math.min(claimable.maxLeaseMs, 2 ** 31 - 1)), claimable.names,
  ]);
  const written = rows[0]!;
  return written.claimed ? { claimed: toClaimed(written) } : { queued: { id: written.id, existing: false } };
}

/** Enqueues one job; see `enqueueJobs`. */
export async function enqueue<S extends z.ZodType>(
  store: Store,
  type: JobType<S>,
  payload: z.input<S>,
  options?: EnqueueOptions,
  limits?: EnqueueLimits,
): Promise<EnqueuedJob> {
  const [row] = await enqueueJobs(store, [{ type, payload, options }], limits);
  return row!;
}
