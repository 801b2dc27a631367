import type { z } from "zod";
import { sql, type Store } from "./db.ts";
import { ValidationError } from "./errors.ts";
import type { EnqueuedJob, EnqueueOptions, JobType } from "./job.ts";
import { toClaimed, type ClaimedJob, type ClaimedRow } from "./claim.ts";
import { toRows, type EnqueueLimits, type Row } from "./validate.ts";

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

const COLUMNS = `
insert into leasehold.jobs
  (queue, name, payload, priority, run_at, max_attempts, lease_ms, backoff_ms, group_key, dedupe_key)
select q, n, p::jsonb, pr, coalesce(to_timestamp(ra / 1000), now() + d * interval '1 millisecond'), ma, lm, bm, g, dk
from unnest($1::text[], $2::text[], $3::text[], $4::smallint[], $5::float8[], $6::float8[],
            $7::integer[], $8::integer[], $9::integer[], $10::text[], $11::text[])
  as t(q, n, p, pr, ra, d, ma, lm, bm, g, dk)`;

/** Without dedupe keys there can be no conflict, and no speculative insertion to pay for. */
const INSERT_JOBS = `${COLUMNS}
returning id::text, false as existing`;

const INSERT_JOBS_DEDUPED = `${COLUMNS}
on conflict (name, dedupe_key) where dedupe_key is not null and status in ('queued', 'running')
do update set dedupe_key = excluded.dedupe_key
returning id::text, xmax <> 0 as existing`;

const columns = (rows: readonly Row[]) => {
  const column = <K extends keyof Row>(k: K) => rows.map((r) => r[k]);
  return [
    column("queue"), column("name"), column("payload"), column("priority"), column("runAtMs"), column("delayMs"),
    column("maxAttempts"), column("leaseMs"), column("backoffMs"), column("group"), column("dedupeKey"),
  ];
};

/**
 * Enqueues many jobs in one statement, one round trip.
 * Every spec is validated first (see shared/validate.ts); if any is bad, a
 * ValidationError names the field and nothing is written. Pass a transaction
 * client as `store.db` to enqueue inside it. A job whose dedupe key matches a
 * pending job returns that job with `existing: true`.
 * Results are in the order of `specs`. `limits` adds the deployment's rules:
 * which queues are served, and the payload size limit.
 */
export async function enqueueJobs(store: Store, specs: readonly JobSpec<any>[], limits?: EnqueueLimits): Promise<EnqueuedJob[]> {
  const rows = toRows(specs, limits);
  if (rows.length === 0) return [];
  const deduped = rows.some((r) => r.dedupeKey !== null);
  const { rows: written } = await store.db.query<EnqueuedJob>(sql(store.schema, deduped ? INSERT_JOBS_DEDUPED : INSERT_JOBS), columns(rows));
  return written;
}

const INSERT_CLAIMED = `
insert into leasehold.jobs
  (queue, name, payload, priority, max_attempts, lease_ms, backoff_ms, group_key,
   status, attempts, lease_token, lease_expires_at, runner_id, started_at)
values ($1::text, $2::text, $3::jsonb, $4::smallint, $5::integer, $6::integer, $7::integer, $8::text,
   'running', 1, gen_random_uuid(), now() + $6::integer * interval '1 millisecond', $9::text, now())
returning id::text, queue, name, payload, attempts, max_attempts, lease_ms, backoff_ms, lease_token::text`;

/**
 * Enqueues one job already claimed by `runnerId`: the insert is the claim
 * (attempt 1 counted, a fresh lease token, the lease expiry, the runner id),
 * so a runner can start a follow-up job without a claim round trip. Only for
 * a job to run now, without a dedupe key. Validated as `enqueueJobs` validates.
 */
export async function enqueueClaimed(store: Store, spec: JobSpec<any>, runnerId: string, limits?: EnqueueLimits): Promise<ClaimedJob> {
  const [row] = toRows([spec], limits) as [Row];
  const refused = row.runAtMs !== null ? "runAt" : row.delayMs > 0 ? "delayMs" : row.dedupeKey !== null ? "dedupeKey" : null;
  if (refused) {
    throw new ValidationError(`enqueueClaimed takes only jobs to run now, without a dedupe key: ${refused} given`, [
      { path: [refused], message: "a job claimed as it is enqueued must run now, without a dedupe key" },
    ]);
  }
  const { rows } = await store.db.query<ClaimedRow>(sql(store.schema, INSERT_CLAIMED), [
    row.queue, row.name, row.payload, row.priority, row.maxAttempts, row.leaseMs, row.backoffMs, row.group, runnerId,
  ]);
  return toClaimed(rows[0]!);
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
