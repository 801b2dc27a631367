import { z } from "zod";
import { sql, type Store } from "./db.ts";
import { ValidationError } from "./errors.ts";
import type { EnqueuedJob, EnqueueOptions, JobType } from "./job.ts";
import { toClaimed, type ClaimedJob, type ClaimedRow } from "./claim.ts";

export const enqueueOptionsSchema = z
  .object({
    queue: z.string().min(1).max(128),
    runAt: z.date().refine((d) => !Number.isNaN(d.getTime()), "invalid date"),
    delayMs: z.number().int().min(0).max(365 * 24 * 3600_000),
    priority: z.number().int().min(-32768).max(32767),
    maxAttempts: z.number().int().min(1).max(1000),
    dedupeKey: z.string().min(1).max(512),
    group: z.string().min(1).max(256),
  })
  .partial()
  .strict();

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

const COLUMNS = `
insert into leasehold.jobs
  (queue, name, payload, priority, run_at, max_attempts, lease_ms, backoff_ms, group_key, dedupe_key)
select q, n, p::jsonb, pr, coalesce(ra, now() + d * interval '1 millisecond'), ma, lm, bm, g, dk
from unnest($1::text[], $2::text[], $3::text[], $4::smallint[], $5::timestamptz[], $6::float8[],
            $7::integer[], $8::integer[], $9::integer[], $10::text[], $11::text[])
  as t(q, n, p, pr, ra, d, ma, lm, bm, g, dk)`;

/** Without dedupe keys there can be no conflict, and no speculative insertion to pay for. */
const INSERT_JOBS = `${COLUMNS}
returning id::text, false as existing`;

const INSERT_JOBS_DEDUPED = `${COLUMNS}
on conflict (name, dedupe_key) where dedupe_key is not null and status in ('queued', 'running')
do update set dedupe_key = excluded.dedupe_key
returning id::text, xmax <> 0 as existing`;

/** One job's row, validated. */
interface Row {
  queue: string;
  name: string;
  payload: string;
  priority: number;
  runAt: Date | null;
  delayMs: number;
  maxAttempts: number;
  leaseMs: number;
  backoffMs: number;
  group: string | null;
  dedupeKey: string | null;
}

/**
 * Validates one spec (payload by its type's schema, then the options) into
 * its row. `at` prefixes the path of every issue, e.g. `["jobs", 3]`.
 */
function toRow({ type, payload, options }: JobSpec<any>, at: (string | number)[]): Row {
  const parsed = (type.schema as z.ZodType).safeParse(payload);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((e) => ({ path: [...at, "payload", ...(e.path as (string | number)[])], message: e.message }));
    throw new ValidationError(
      `invalid payload for ${type.name}: ${issues.map((e) => `${e.path.join(".")}: ${e.message}`).join("; ")}`,
      issues,
    );
  }
  let opts: EnqueueOptions = {};
  if (options) {
    const checked = enqueueOptionsSchema.safeParse(options);
    if (!checked.success) {
      const issues = checked.error.issues.map((e) => ({ path: [...at, ...(e.path as (string | number)[])], message: e.message }));
      throw new ValidationError(
        `invalid options for ${type.name}: ${issues.map((e) => `${e.path.join(".")}: ${e.message}`).join("; ")}`,
        issues,
      );
    }
    opts = checked.data;
  }
  return {
    queue: opts.queue ?? type.queue,
    name: type.name,
    payload: storable(type.name, payload, at),
    priority: opts.priority ?? type.priority,
    runAt: opts.runAt ?? null,
    delayMs: opts.delayMs ?? 0,
    maxAttempts: opts.maxAttempts ?? type.maxAttempts,
    leaseMs: type.leaseMs,
    backoffMs: type.backoffMs,
    group: opts.group ?? null,
    dedupeKey: opts.dedupeKey ?? null,
  };
}

/**
 * Enqueues many jobs in one statement, one round trip. Every payload is
 * validated by its type's schema first; if any is bad, nothing is written.
 * Pass a transaction client as `store.db` to enqueue inside it. A job whose
 * dedupe key matches a pending job returns that job with `existing: true`.
 * Results are in the order of `specs`.
 */
export async function enqueueJobs(store: Store, specs: readonly JobSpec<any>[]): Promise<EnqueuedJob[]> {
  if (specs.length === 0) return [];
  const rows = specs.map((spec, i) => toRow(spec, specs.length === 1 ? [] : ["jobs", i]));
  const seenKeys = new Set<string>();
  rows.forEach((row, i) => {
    if (row.dedupeKey === null) return;
    const key = `${row.name}\u0000${row.dedupeKey}`;
    if (seenKeys.has(key)) {
      throw new ValidationError(`dedupe key ${row.dedupeKey} appears twice in one batch`, [
        { path: ["jobs", i, "dedupeKey"], message: "duplicate dedupe key in batch" },
      ]);
    }
    seenKeys.add(key);
  });
  const column = <K extends keyof Row>(k: K) => rows.map((r) => r[k]);
  const { rows: written } = await store.db.query<{ id: string; existing: boolean }>(
    sql(store.schema, seenKeys.size > 0 ? INSERT_JOBS_DEDUPED : INSERT_JOBS),
    [
      column("queue"), column("name"), column("payload"), column("priority"), column("runAt"), column("delayMs"),
      column("maxAttempts"), column("leaseMs"), column("backoffMs"), column("group"), column("dedupeKey"),
    ],
  );
  return written;
}

const INSERT_CLAIMED = `
insert into leasehold.jobs
  (queue, name, payload, priority, max_attempts, lease_ms, backoff_ms, group_key,
   status, attempts, runs, lease_token, lease_expires_at, runner_id, started_at)
values ($1::text, $2::text, $3::jsonb, $4::smallint, $5::integer, $6::integer, $7::integer, $8::text,
   'running', 1, 1, gen_random_uuid(), now() + $6::integer * interval '1 millisecond', $9::text, now())
returning id::text, queue, name, payload, attempts, runs, start_first, max_attempts, lease_ms, backoff_ms, lease_token::text`;

/**
 * Enqueues one job already claimed by `runnerId`: the insert is the claim
 * (attempt 1 counted, a fresh lease token, the lease expiry, the runner id),
 * so a runner can start a follow-up job without a claim round trip. Only for
 * a job to run now, without a dedupe key.
 */
export async function enqueueClaimed(store: Store, spec: JobSpec<any>, runnerId: string): Promise<ClaimedJob> {
  const row = toRow(spec, []);
  if (row.dedupeKey !== null || row.runAt !== null || row.delayMs > 0) {
    throw new Error("enqueueClaimed takes only jobs to run now, without a dedupe key");
  }
  const { rows } = await store.db.query<ClaimedRow>(sql(store.schema, INSERT_CLAIMED), [
    row.queue, row.name, row.payload, row.priority, row.maxAttempts, row.leaseMs, row.backoffMs, row.group, runnerId,
  ]);
  return toClaimed(rows[0]!);
}

/** The payload as JSON Postgres can store, or a ValidationError saying why not. */
function storable(name: string, payload: unknown, at: (string | number)[]): string {
  let json: string;
  try {
    json = JSON.stringify(payload ?? null);
  } catch (err) {
    throw new ValidationError(`invalid payload for ${name}: ${(err as Error).message}`, [
      { path: [...at, "payload"], message: "must be serializable as JSON" },
    ]);
  }
  if (json.includes("\\u0000")) {
    throw new ValidationError(`invalid payload for ${name}: contains the NUL character`, [
      { path: [...at, "payload"], message: "must not contain the NUL character (Postgres jsonb cannot store it)" },
    ]);
  }
  return json;
}

/** Enqueues one job; see `enqueueJobs`. */
export async function enqueue<S extends z.ZodType>(
  store: Store,
  type: JobType<S>,
  payload: z.input<S>,
  options?: EnqueueOptions,
): Promise<EnqueuedJob> {
  const [row] = await enqueueJobs(store, [{ type, payload, options }]);
  return row!;
}
