/**
 * The one validation step every enqueue goes through (API, CLI, the core's
 * `enqueue`, `enqueueJobs` and `enqueueClaimed`, a handler's follow-ups), and
 * the bounds `defineJob` holds a job type's defaults to. A refusal is a
 * `ValidationError` with the path of each bad field; nothing is written.
 */
import * as z from "zod";
import { MAX_BACKOFF_MS, MIN_LEASE_MESSAGE, MIN_LEASE_MS, RUNNER_MARGIN_MS } from "../settings/config.ts";
import { concurrencyIssues, fairnessOf, type Fairness } from "./concurrency.ts";
import { ValidationError } from "../errors.ts";
import { flowControlIssues, flowControlOf, MAX_FLOW_KEY_LENGTH, MAX_FLOW_PERIOD_MS, type FlowControl } from "./flow-control.ts";
import type { EnqueueOptions, JobDefaults, JobType } from "./job-types.ts";
import { DEFAULT_MAX_PAYLOAD_BYTES, payloadJson, type Issue, type Path } from "./payload.ts";
import { MAX_RATE_KEY_LENGTH, MAX_RATE_LIMIT, MAX_RATE_PERIOD_MS, rateLimitIssues, rateOf, type Rate } from "./rate-limit.ts";
import { servingProblem, type ServingRules } from "../settings/serving.ts";
import { textProblem } from "../text.ts";

/** The longest lease any runner can hold: Lambda's 15 minutes, less the runner's margin. */
export const MAX_LEASE_MS = 900_000 - RUNNER_MARGIN_MS;
export const MAX_DELAY_MS = 365 * 24 * 3600_000;
export const MAX_ATTEMPTS = 1_000;
/** Postgres `smallint`. */
export const MIN_PRIORITY = -32_768;
export const MAX_PRIORITY = 32_767;
/** Postgres' earliest `timestamptz`, 4714-11-24 00:00 UTC BC; its latest is past JavaScript's. */
export const MIN_RUN_AT_MS = -210_866_803_200_000;
/** JavaScript's latest Date, +275760-09-13. */
export const MAX_RUN_AT_MS = 8.64e15;
export const MAX_QUEUE_LENGTH = 128;
export const MAX_DEDUPE_KEY_LENGTH = 512;
export const MAX_GROUP_LENGTH = 256;

/** A non-empty string Postgres stores exactly: valid Unicode, no NUL. */
export const storableText = (max: number) =>
  z.string().min(1).max(max).superRefine((s, ctx) => {
    const problem = textProblem(s);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });

const priority = () => z.number().int().min(MIN_PRIORITY).max(MAX_PRIORITY);
const maxAttempts = () => z.number().int().min(1).max(MAX_ATTEMPTS);
const flowPeriodMs = () => z.number().int().min(1).max(MAX_FLOW_PERIOD_MS);

/**
 * Each enqueue option's schema, made anew on each call: an edge that extends
 * zod (the API's OpenAPI metadata) gets instances made after its extension.
 */
export const enqueueOptionFields = () => ({
  queue: storableText(MAX_QUEUE_LENGTH).optional(),
  runAt: z
    .date()
    .refine((d) => !Number.isNaN(d.getTime()), "invalid date")
    .refine((d) => d.getTime() >= MIN_RUN_AT_MS, "must be no earlier than 4714-11-24 BC, Postgres' earliest time")
    .optional(),
  delayMs: z.number().int().min(0).max(MAX_DELAY_MS).optional(),
  priority: priority().optional(),
  maxAttempts: maxAttempts().optional(),
  dedupeKey: storableText(MAX_DEDUPE_KEY_LENGTH).optional(),
  group: storableText(MAX_GROUP_LENGTH).optional(),
  debounce: z
    .strictObject({ key: storableText(MAX_FLOW_KEY_LENGTH), periodMs: flowPeriodMs(), maxWaitMs: flowPeriodMs().optional() })
    .refine((d) => d.maxWaitMs === undefined || d.maxWaitMs >= d.periodMs, { path: ["maxWaitMs"], message: "must be at least periodMs" })
    .optional(),
  throttle: z.strictObject({ key: storableText(MAX_FLOW_KEY_LENGTH), periodMs: flowPeriodMs() }).optional(),
  rateLimit: z
    .strictObject({
      key: storableText(MAX_RATE_KEY_LENGTH),
      limit: z.number().int().min(1).max(MAX_RATE_LIMIT).optional(),
      periodMs: z.number().int().min(1).max(MAX_RATE_PERIOD_MS).optional(),
    })
    .optional(),
});

export const enqueueOptionsSchema = z.strictObject(enqueueOptionFields());

export const jobDefaultsSchema = z.object({
  queue: storableText(MAX_QUEUE_LENGTH),
  maxAttempts: maxAttempts(),
  leaseMs: z.number().int().min(MIN_LEASE_MS, MIN_LEASE_MESSAGE).max(MAX_LEASE_MS),
  backoffMs: z.number().int().min(0).max(MAX_BACKOFF_MS),
  priority: priority(),
}) satisfies z.ZodType<JobDefaults>;

/** What enqueue checks beyond a job's own schema and the fixed bounds. */
export interface EnqueueLimits {
  /** Queues some runner serves, with the longest lease each allows; not checked when absent. */
  serving?: ServingRules;
  /** Bytes of UTF-8 JSON a payload may take; default `DEFAULT_MAX_PAYLOAD_BYTES` (1 MB). */
  maxPayloadBytes?: number;
}

/** One job's row, validated. */
export interface Row extends Fairness, FlowControl, Rate {
  queue: string;
  name: string;
  payload: string;
  priority: number;
  /** Epoch milliseconds, or null to run after `delayMs`. */
  runAtMs: number | null;
  delayMs: number;
  maxAttempts: number;
  leaseMs: number;
  backoffMs: number;
  group: string | null;
  dedupeKey: string | null;
}

const zodIssues = (error: z.ZodError, at: Path): Issue[] =>
  error.issues.map((i) => ({ path: [...at, ...i.path.map((p) => (typeof p === "symbol" ? String(p) : p))], message: i.message }));

const describe = (issues: Issue[]) => issues.map((i) => (i.path.length ? `${i.path.join(".")}: ${i.message}` : i.message)).join("; ");

const refusal = (what: string, issues: Issue[]) => new ValidationError(`${what}: ${describe(issues)}`, issues);

/** A job's dedupe identity: neither a job name nor a dedupe key can hold NUL, so the pair is unambiguous. */
export const dedupeIdentity = (name: string, dedupeKey: string) => `${name}\u0000${dedupeKey}`;

const JOB_NAME = /^[A-Za-z0-9_.:-]{1,128}$/;

/** A job type's defaults and, with `serving`, whether a runner could run it; issues under `at`. */
function definitionIssues(type: JobType, at: Path, serving: ServingRules | undefined): Issue[] {
  const issues: Issue[] = [];
  if (typeof type.name !== "string" || !JOB_NAME.test(type.name)) {
    issues.push({ path: [...at, "name"], message: `invalid job name ${JSON.stringify(type.name)}: use 1-128 of A-Z a-z 0-9 _ . : -` });
  }
  issues.push(...concurrencyIssues(type, at));
  issues.push(...flowControlIssues(type, at));
  issues.push(...rateLimitIssues(type.rateLimit, at));
  const checked = jobDefaultsSchema.safeParse(type);
  if (!checked.success) return [...issues, ...zodIssues(checked.error, at)];
  const problem = serving && servingProblem(serving, type.queue, type.leaseMs);
  return problem ? [...issues, { path: [...at, problem.field], message: problem.message }] : issues;
}

/**
 * What `defineJob` takes, and nothing else: an option it does not know (a
 * misspelling, or a feature Leasehold does not have) is refused by name
 * instead of being ignored. Only the keys are checked here; the values are
 * `checkJobType`'s.
 */
const definitionKeys = z.strictObject({
  name: z.unknown(), schema: z.unknown(), handler: z.unknown(),
  queue: z.unknown(), maxAttempts: z.unknown(), leaseMs: z.unknown(), backoffMs: z.unknown(), priority: z.unknown(),
  concurrency: z.strictObject({ limit: z.unknown(), key: z.unknown() }).optional(),
  fair: z.unknown(),
  debounce: z.strictObject({ key: z.unknown(), periodMs: z.unknown(), maxWaitMs: z.unknown() }).optional(),
  throttle: z.strictObject({ key: z.unknown(), periodMs: z.unknown() }).optional(),
  rateLimit: z.strictObject({ limit: z.unknown(), periodMs: z.unknown(), key: z.unknown() }).optional(),
});

/** Refuses a definition with an option `defineJob` does not know, naming each such option. */
export function checkDefinitionKeys(definition: unknown): void {
  const parsed = definitionKeys.safeParse(definition);
  if (parsed.success) return;
  const issues = parsed.error.issues.flatMap((i) => i.code !== "unrecognized_keys" ? [] : i.keys.map((key) => {
    const nested = i.path[0] as "concurrency" | "debounce" | "throttle" | "rateLimit" | undefined;
    const known = Object.keys(nested === undefined ? definitionKeys.shape : definitionKeys.shape[nested].unwrap().shape);
    return { path: [...i.path.map(String), key], message: `unknown option ${JSON.stringify(key)}; known: ${known.join(", ")}` };
  }));
  if (issues.length > 0) {
    const name = (definition as { name?: unknown }).name;
    throw refusal(`invalid job type ${JSON.stringify(name)}`, issues);
  }
}

/** Refuses a job type whose name, schema, handler or defaults are out of bounds, or that no runner could run. */
export function checkJobType(type: JobType, serving?: ServingRules): void {
  const issues: Issue[] = [];
  if (typeof (type.schema as { safeParse?: unknown } | undefined)?.safeParse !== "function") {
    issues.push({ path: ["schema"], message: "must be a zod schema" });
  }
  if (typeof type.handler !== "function") issues.push({ path: ["handler"], message: "must be a function" });
  issues.push(...definitionIssues(type, [], serving));
  if (issues.length > 0) throw refusal(`invalid job type ${JSON.stringify(type.name)}`, issues);
}

const isJobType = (type: unknown): type is JobType =>
  typeof type === "object" && type !== null && typeof (type as JobType).name === "string" &&
  typeof (type as JobType).schema?.safeParse === "function";

/** The payload's JSON, which must pass the schema both as given and as the handler will read it back. */
function payloadRow(type: JobType, payload: unknown, at: Path, maxBytes: number): string {
  const stored = payloadJson(payload, [...at, "payload"], maxBytes);
  if ("issues" in stored) throw refusal(`invalid payload for ${type.name}`, stored.issues);
  const given = type.schema.safeParse(payload);
  if (!given.success) throw refusal(`invalid payload for ${type.name}`, zodIssues(given.error, [...at, "payload"]));
  // JSON gives an exact payload back equal to what was given: the schema just passed it.
  if (stored.exact) return stored.json;
  const readBack = type.schema.safeParse(JSON.parse(stored.json));
  if (!readBack.success) {
    const issues = zodIssues(readBack.error, [...at, "payload"]).map((i) => ({ ...i, message: `as stored (JSON): ${i.message}` }));
    throw refusal(`invalid payload for ${type.name}: the handler would not accept it as stored`, issues);
  }
  return stored.json;
}

/**
 * Validates one spec into its row. `at` prefixes the path of every issue,
 * e.g. `["jobs", 3]`; `checked` holds the job types already checked.
 */
function toRow(spec: unknown, at: Path, limits: EnqueueLimits, checked: Set<JobType>): Row {
  const { type, payload, options } = (typeof spec === "object" && spec !== null ? spec : {}) as {
    type?: unknown; payload?: unknown; options?: unknown;
  };
  if (!isJobType(type)) throw refusal("invalid job", [{ path: [...at, "type"], message: "must be a job type (made by defineJob)" }]);
  if (!checked.has(type)) {
    const issues = definitionIssues(type, [...at, "type"], undefined);
    if (issues.length > 0) throw refusal(`invalid job type ${JSON.stringify(type.name)}`, issues);
    checked.add(type);
  }
  const json = payloadRow(type, payload, at, limits.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES);
  let opts: EnqueueOptions = {};
  if (options !== undefined) {
    const parsed = enqueueOptionsSchema.safeParse(options);
    if (!parsed.success) throw refusal(`invalid options for ${type.name}`, zodIssues(parsed.error, at));
    opts = parsed.data;
  }
  // The key is read from the payload as its handler will read it.
  const fairness = fairnessOf(type, type.concurrency?.key ? JSON.parse(json) : payload, opts.group ?? null, at);
  if ("message" in fairness) throw refusal(`invalid payload for ${type.name}`, [fairness]);
  const keyFunction = typeof type.debounce?.key === "function" || typeof type.throttle?.key === "function" ||
    typeof type.rateLimit?.key === "function";
  const flow = flowControlOf(type, keyFunction ? JSON.parse(json) : payload, opts, at);
  if ("message" in flow) throw refusal(`invalid options for ${type.name}`, [flow]);
  const rate = rateOf(type.name, type.rateLimit, keyFunction ? JSON.parse(json) : payload, opts.rateLimit, at);
  if ("message" in rate) throw refusal(`invalid ${rate.path.at(-1) === "payload" ? "payload" : "options"} for ${type.name}`, [rate]);
  const row: Row = {
    queue: opts.queue ?? type.queue,
    name: type.name,
    payload: json,
    priority: opts.priority ?? type.priority,
    runAtMs: opts.runAt?.getTime() ?? null,
    delayMs: opts.delayMs ?? 0,
    maxAttempts: opts.maxAttempts ?? type.maxAttempts,
    leaseMs: type.leaseMs,
    backoffMs: type.backoffMs,
    group: opts.group ?? null,
    dedupeKey: opts.dedupeKey ?? null,
    fairGroup: fairness.fairGroup,
    concurrencyKey: fairness.concurrencyKey,
    concurrencyLimit: fairness.concurrencyLimit,
    debounceKey: flow.debounceKey,
    debouncePeriodMs: flow.debouncePeriodMs,
    debounceMaxWaitMs: flow.debounceMaxWaitMs,
    throttleKey: flow.throttleKey,
    throttlePeriodMs: flow.throttlePeriodMs,
    rateKey: rate.rateKey,
    rateLimit: rate.rateLimit,
    ratePeriodMs: rate.ratePeriodMs,
  };
  const problem = limits.serving && servingProblem(limits.serving, row.queue, row.leaseMs);
  if (problem) throw refusal(`${type.name} cannot run`, [{ path: [...at, "queue"], message: problem.message }]);
  return row;
}

/**
 * Validates every spec into its row, or throws a ValidationError for the
 * first bad one. A lone spec's issues have no `jobs.<i>` prefix.
 */
export function toRows(specs: readonly unknown[], limits: EnqueueLimits = {}): Row[] {
  if (!Array.isArray(specs)) throw refusal("invalid jobs", [{ path: ["jobs"], message: "must be an array of jobs" }]);
  const checked = new Set<JobType>();
  const rows = specs.map((spec, i) => toRow(spec, specs.length === 1 ? [] : ["jobs", i], limits, checked));
  const seenKeys = new Set<string>();
  rows.forEach((row, i) => {
    if (row.dedupeKey === null) return;
    const key = dedupeIdentity(row.name, row.dedupeKey);
    if (seenKeys.has(key)) {
      throw refusal(`dedupe key ${JSON.stringify(row.dedupeKey)} appears twice in one batch`, [
        { path: ["jobs", i, "dedupeKey"], message: "duplicate dedupe key in batch" },
      ]);
    }
    seenKeys.add(key);
  });
  return rows;
}
