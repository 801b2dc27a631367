import { z } from "zod";
import { sql, type Store } from "./db.ts";
import { ValidationError } from "./errors.ts";
import type { EnqueuedJob, EnqueueOptions, JobType } from "./job.ts";

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

const INSERT_JOBS = `
insert into leasehold.jobs
  (queue, name, payload, priority, run_at, max_attempts, lease_ms, backoff_ms, group_key, dedupe_key)
select q, n, p::jsonb, pr, coalesce(ra, now() + d * interval '1 millisecond'), ma, lm, bm, g, dk
from unnest($1::text[], $2::text[], $3::text[], $4::smallint[], $5::timestamptz[], $6::float8[],
            $7::integer[], $8::integer[], $9::integer[], $10::text[], $11::text[])
  as t(q, n, p, pr, ra, d, ma, lm, bm, g, dk)
on conflict (name, dedupe_key) where dedupe_key is not null and status in ('queued', 'running')
do update set dedupe_key = excluded.dedupe_key
returning id::text, xmax <> 0 as existing`;

/**
 * Enqueues many jobs in one statement, one round trip. Every payload is
 * validated by its type's schema first; if any is bad, nothing is written.
 * Pass a transaction client as `store.db` to enqueue inside it. A job whose
 * dedupe key matches a pending job returns that job with `existing: true`.
 * Results are in the order of `specs`.
 */
export async function enqueueJobs(store: Store, specs: readonly JobSpec<any>[]): Promise<EnqueuedJob[]> {
  if (specs.length === 0) return [];
  const n = specs.length;
  const queues = new Array<string>(n);
  const names = new Array<string>(n);
  const payloads = new Array<string>(n);
  const priorities = new Array<number>(n);
  const runAts = new Array<Date | null>(n);
  const delays = new Array<number>(n);
  const maxAttempts = new Array<number>(n);
  const leases = new Array<number>(n);
  const backoffs = new Array<number>(n);
  const groups = new Array<string | null>(n);
  const dedupeKeys = new Array<string | null>(n);
  const seenKeys = new Set<string>();
  const at = (i: number) => (n === 1 ? [] : ["jobs", i]);

  for (let i = 0; i < n; i++) {
    const { type, payload, options } = specs[i]!;
    const parsed = (type.schema as z.ZodType).safeParse(payload);
    if (!parsed.success) {
      throw new ValidationError(
        `invalid payload for ${type.name}: ${parsed.error.issues.map((e) => `${[...at(i), "payload", ...e.path].join(".")}: ${e.message}`).join("; ")}`,
        parsed.error.issues.map((e) => ({ path: [...at(i), "payload", ...(e.path as (string | number)[])], message: e.message })),
      );
    }
    let opts: EnqueueOptions = {};
    if (options) {
      const checked = enqueueOptionsSchema.safeParse(options);
      if (!checked.success) {
        throw new ValidationError(
          `invalid options for ${type.name}: ${checked.error.issues.map((e) => `${e.path.join(".")}: ${e.message}`).join("; ")}`,
          checked.error.issues.map((e) => ({ path: [...at(i), ...(e.path as (string | number)[])], message: e.message })),
        );
      }
      opts = checked.data;
    }
    if (opts.dedupeKey !== undefined) {
      const key = `${type.name}\u0000${opts.dedupeKey}`;
      if (seenKeys.has(key)) {
        throw new ValidationError(`dedupe key ${opts.dedupeKey} appears twice in one batch`, [
          { path: [...at(i), "dedupeKey"], message: "duplicate dedupe key in batch" },
        ]);
      }
      seenKeys.add(key);
    }
    queues[i] = opts.queue ?? type.queue;
    names[i] = type.name;
    payloads[i] = storable(type.name, payload, at(i));
    priorities[i] = opts.priority ?? type.priority;
    runAts[i] = opts.runAt ?? null;
    delays[i] = opts.delayMs ?? 0;
    maxAttempts[i] = opts.maxAttempts ?? type.maxAttempts;
    leases[i] = type.leaseMs;
    backoffs[i] = type.backoffMs;
    groups[i] = opts.group ?? null;
    dedupeKeys[i] = opts.dedupeKey ?? null;
  }

  const { rows } = await store.db.query<{ id: string; existing: boolean }>(sql(store.schema, INSERT_JOBS), [
    queues, names, payloads, priorities, runAts, delays, maxAttempts, leases, backoffs, groups, dedupeKeys,
  ]);
  return rows;
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
