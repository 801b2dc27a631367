/**
 * The API's zod schemas: one source for request validation, response types
 * and the OpenAPI document. Job payloads are `unknown` here; each route
 * validates them against the named job type's own schema.
 */
import { z } from "@hono/zod-openapi";
import type { AttemptRecord, JobRecord, StepRecord } from "../../shared/observe/admin.ts";
import type { AttemptOutcome, JobStatus } from "../../shared/jobs/job.ts";
import { enqueueOptionFields, MAX_DELAY_MS, storableText } from "../../shared/jobs/validate.ts";

export const JOB_STATUSES = ["queued", "running", "succeeded", "dead", "cancelled"] as const satisfies readonly JobStatus[];
const OUTCOMES = ["succeeded", "failed", "timeout", "lease_expired", "released", "slept"] as const satisfies readonly AttemptOutcome[];
// Compile-time checks that the lists above name every status and outcome.
type Covers<T, L extends readonly unknown[]> = [Exclude<T, L[number]>] extends [never] ? true : false;
const coversStatuses: Covers<JobStatus, typeof JOB_STATUSES> = true;
const coversOutcomes: Covers<AttemptOutcome, typeof OUTCOMES> = true;
void coversStatuses, coversOutcomes;

/** Postgres `bigint` max: the largest job id there can be. */
export const MAX_JOB_ID = 9223372036854775807n;
export const MAX_BATCH_JOBS = 1_000;
const MAX_DELAY_SECONDS = MAX_DELAY_MS / 1000;

export const jobIdSchema = z
  .string()
  .regex(/^[1-9][0-9]{0,18}$/, `must be a positive integer up to ${MAX_JOB_ID}`)
  .refine((id) => !/^[0-9]+$/.test(id) || BigInt(id) <= MAX_JOB_ID, `must be a positive integer up to ${MAX_JOB_ID}`)
  .openapi({ example: "42" });

export const idParamsSchema = z.object({
  id: jobIdSchema.openapi({ param: { name: "id", in: "path" } }),
});

/** The core's own bounds for each option (text Postgres stores exactly), made after zod's OpenAPI extension. */
const option = enqueueOptionFields();

export const enqueueRequestSchema = z
  .strictObject({
    name: storableText(128).openapi({ description: "The job type's name.", example: "email.welcome" }),
    payload: z.unknown().optional().openapi({
      description: "Validated by the job type's own schema (which decides whether it may be left out).",
      example: { to: "ada@example.com", name: "Ada" },
    }),
    queue: option.queue.openapi({ description: "Defaults to the job type's queue." }),
    runAt: z.iso.datetime({ offset: true }).optional().openapi({ description: "When to run (ISO 8601); default now." }),
    delaySeconds: z.number().min(0).max(MAX_DELAY_SECONDS).optional().openapi({ description: "Run after this long." }),
    priority: option.priority.openapi({ description: "Higher runs first." }),
    maxAttempts: option.maxAttempts,
    dedupeKey: option.dedupeKey.openapi({ description: "An equal key on a pending job of this type returns that job." }),
    group: option.group.openapi({ description: "Tenant or other group." }),
    debounce: option.debounce.openapi({
      description: "Keep one unclaimed job of this type per key: a later enqueue of the key returns that job (200) with this request's payload and options, its start moved to periodMs after this request, never later than maxWaitMs (default 10 periods) after the job's first enqueue. Not with runAt, delaySeconds, dedupeKey or throttle.",
      example: { key: "doc-42", periodMs: 5_000, maxWaitMs: 60_000 },
    }),
    throttle: option.throttle.openapi({
      description: "Keep the first job of this type per key for periodMs from its enqueue: every other enqueue of the key in that window returns it (200) and writes nothing. Not with dedupeKey or debounce.",
      example: { key: "user-7", periodMs: 60_000 },
    }),
    rateLimit: option.rateLimit.openapi({
      description: "This job's rate limit key (and limit or periodMs) in place of its type's: at most limit jobs of a key start in any periodMs. Only for a job type that declares a rateLimit.",
      example: { key: "partner-42" },
    }),
  })
  .refine((b) => b.runAt === undefined || b.delaySeconds === undefined, {
    path: ["delaySeconds"],
    message: "give runAt or delaySeconds, not both",
  })
  .superRefine((b, ctx) => {
    // The core refuses these too; here each names the request's own field.
    if (b.debounce && b.throttle) ctx.addIssue({ code: "custom", path: ["throttle"], message: "give debounce or throttle, not both" });
    if ((b.debounce || b.throttle) && b.dedupeKey !== undefined) {
      ctx.addIssue({ code: "custom", path: ["dedupeKey"], message: `a ${b.debounce ? "debounced" : "throttled"} job cannot also have a dedupe key: give one of them` });
    }
    for (const field of ["runAt", "delaySeconds"] as const) {
      if (b.debounce && b[field] !== undefined) {
        ctx.addIssue({ code: "custom", path: [field], message: "a debounced job starts periodMs after its last enqueue: give no runAt or delaySeconds" });
      }
    }
  })
  .openapi("EnqueueRequest");
export type EnqueueRequest = z.output<typeof enqueueRequestSchema>;

export const batchRequestSchema = z
  .strictObject({ jobs: z.array(enqueueRequestSchema).min(1).max(MAX_BATCH_JOBS) })
  .openapi("BatchEnqueueRequest");

export const listQuerySchema = z.strictObject({
  status: z.enum(JOB_STATUSES).optional().openapi({ description: "`dead` is the dead-jobs view." }),
  queue: storableText(128).optional(),
  name: storableText(128).optional(),
  limit: z.coerce.number().int().min(1).max(500).optional().openapi({ type: "integer", minimum: 1, maximum: 500, example: 50 }),
  cursor: jobIdSchema.optional().openapi({ description: "The `nextCursor` of the previous page." }),
});

const isoDate = z.iso.datetime();

export const jobSchema = z
  .object({
    id: z.string().openapi({ example: "42" }),
    queue: z.string(),
    name: z.string(),
    payload: z.unknown(),
    status: z.enum(JOB_STATUSES),
    priority: z.number().int(),
    runAt: isoDate,
    attempts: z.number().int().openapi({ description: "Attempts used; counted at claim." }),
    maxAttempts: z.number().int(),
    generation: z.number().int().openapi({ description: "1, plus one per manual retry of the dead job." }),
    leaseExpiresAt: isoDate.nullable(),
    runnerId: z.string().nullable(),
    group: z.string().nullable(),
    dedupeKey: z.string().nullable(),
    lastError: z.string().nullable(),
    createdAt: isoDate,
    startedAt: isoDate.nullable(),
    finishedAt: isoDate.nullable(),
  })
  .openapi("Job");
export type JobJson = z.output<typeof jobSchema>;

export const attemptSchema = z
  .object({
    run: z.number().int().openapi({ description: "The run this row records (a handler's ctx.run): 1 on the first, one more per claim, unique for the life of the job across releases and manual retries." }),
    generation: z.number().int(),
    runnerId: z.string().nullable(),
    claimedAt: isoDate,
    endedAt: isoDate,
    outcome: z.enum(OUTCOMES),
    error: z.string().nullable(),
    steps: z
      .array(z.object({ name: z.string(), replayed: z.boolean(), ms: z.number() }))
      .nullable()
      .openapi({ description: "The steps this attempt reached: replayed from the record or run, and how long each took. Null when it used none." }),
  })
  .openapi("Attempt");

export const stepSchema = z
  .object({
    generation: z.number().int(),
    position: z.number().int().openapi({ description: "1 for the first step the handler reaches." }),
    name: z.string(),
    attempt: z.number().int().openapi({ description: "The attempt that ran it." }),
    durationMs: z.number(),
    recordedAt: isoDate,
    result: z.unknown(),
  })
  .openapi("Step");

export const jobDetailSchema = jobSchema
  .extend({
    result: z.unknown().openapi({
      description: "The handler's return value (JSON), kept with the succeeded job; null before it succeeds, or when the handler returned nothing.",
    }),
    attemptHistory: z.array(attemptSchema),
    steps: z.array(stepSchema).openapi({ description: "The completed steps of every generation, in order (`ctx.step`)." }),
  })
  .openapi("JobWithAttempts");

/** How an enqueue's job came to stand: present and true only when so. */
const standingFields = {
  debounced: z.boolean().optional().openapi({ description: "True: the key's unclaimed job took this request's payload and start." }),
  throttled: z.boolean().optional().openapi({ description: "True: the job standing in the key's throttle window; nothing was written." }),
};

export const enqueuedJobSchema = jobSchema.extend(standingFields).openapi("EnqueuedJob");

export const batchResponseSchema = z
  .object({ jobs: z.array(z.object({ id: z.string(), existing: z.boolean(), ...standingFields })) })
  .openapi("BatchEnqueueResponse");

export const jobPageSchema = z
  .object({ jobs: z.array(jobSchema), nextCursor: z.string().nullable() })
  .openapi("JobPage");

export const queuesSchema = z
  .object({
    queues: z.array(
      z.object({
        queue: z.string(),
        ready: z.number().int().openapi({ description: "Queued and due now." }),
        unserved: z.number().int().openapi({
          description: "Of the ready jobs, those no runner can claim: queue not served, job type not deployed, or lease longer than the runner allows. They wait uncharged.",
        }),
        delayed: z.number().int().openapi({ description: "Queued for later (delayed or backing off)." }),
        running: z.number().int(),
        dead: z.number().int(),
        oldestReadyAgeSeconds: z.number(),
      }),
    ),
  })
  .openapi("Queues");

export const groupsQuerySchema = z.strictObject({
  queue: storableText(128).optional().openapi({ description: "Only this queue's groups." }),
});

export const groupsSchema = z
  .object({
    groups: z.array(
      z.object({
        queue: z.string(),
        group: z.string().nullable().openapi({ description: "Null: ungrouped jobs, and job types that opt out of fairness." }),
        ready: z.number().int(),
        running: z.number().int(),
        limit: z.number().int().nullable().openapi({ description: "The concurrency limit its jobs carry; null: none." }),
      }),
    ),
    rateLimits: z.array(
      z.object({
        key: z.string(),
        waiting: z.number().int().openapi({ description: "Due jobs carrying the key (of this queue, with `queue`)." }),
        limit: z.number().int(),
        periodMs: z.number().int(),
        startedInWindow: z.number().int().openapi({ description: "Jobs of the key started in the last period." }),
        opensAt: z.string().nullable().openapi({ description: "When the full window lets the next job start; null: one may start now." }),
      }),
    ).openapi({ description: "Rate limit keys with due jobs, most waiting first (up to 500)." }),
  })
  .openapi("Groups");

export const MAX_THROUGHPUT_MINUTES = 60;

export const throughputQuerySchema = z.strictObject({
  minutes: z.coerce.number().int().min(1).max(MAX_THROUGHPUT_MINUTES).default(15).openapi({
    type: "integer", minimum: 1, maximum: MAX_THROUGHPUT_MINUTES, default: 15,
    description: "How many minutes, the current one included.",
  }),
});

export const throughputSchema = z
  .object({
    minutes: z.number().int(),
    buckets: z.array(
      z.object({
        minute: isoDate.openapi({ description: "The start of the minute." }),
        succeeded: z.number().int(),
        failed: z.number().int(),
        timeout: z.number().int(),
        leaseExpired: z.number().int().openapi({ description: "Attempts whose lease expired (outcome `lease_expired`)." }),
      }),
    ).openapi({ description: "One per minute, oldest first; the last is the current minute so far." }),
  })
  .openapi("Throughput");

export const errorSchema = z
  .object({
    error: z.object({
      code: z.string().openapi({ example: "invalid_request" }),
      message: z.string(),
      issues: z.array(z.object({ path: z.array(z.union([z.string(), z.number()])), message: z.string() })).optional(),
      status: z.enum(JOB_STATUSES).optional().openapi({ description: "The job's current status (409 only)." }),
    }),
  })
  .openapi("Error");
export type ErrorJson = z.output<typeof errorSchema>;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function toJobJson(job: JobRecord): JobJson {
  return {
    id: job.id, queue: job.queue, name: job.name, payload: job.payload, status: job.status, priority: job.priority,
    runAt: job.runAt.toISOString(), attempts: job.attempts, maxAttempts: job.maxAttempts,
    generation: job.generation, leaseExpiresAt: iso(job.leaseExpiresAt), runnerId: job.runnerId, group: job.group, dedupeKey: job.dedupeKey,
    lastError: job.lastError, createdAt: job.createdAt.toISOString(), startedAt: iso(job.startedAt),
    finishedAt: iso(job.finishedAt),
  };
}

export function toAttemptJson(a: AttemptRecord): z.output<typeof attemptSchema> {
  return { ...a, claimedAt: a.claimedAt.toISOString(), endedAt: a.endedAt.toISOString() };
}

export function toStepJson(s: StepRecord): z.output<typeof stepSchema> {
  return { ...s, recordedAt: s.recordedAt.toISOString() };
}
