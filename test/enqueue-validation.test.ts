import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import defaultConfig from "../leasehold.config.ts";
import { enqueue, enqueueClaimed, enqueueJobs, job, type EnqueueLimits, type JobSpec } from "../shared/jobs/enqueue.ts";
import { ValidationError } from "../shared/errors.ts";
import { defineJob, type JobType } from "../shared/jobs/job.ts";
import { servingRules } from "../shared/settings/serving.ts";
import { MIN_LEASE_MS } from "../shared/settings/config.ts";
import { MIN_RUN_AT_MS } from "../shared/jobs/validate.ts";
import { createTestDb, drivers, type TestDb } from "./support/db.ts";

const loose = defineJob({ name: "loose", schema: z.object({ value: z.unknown() }).passthrough(), handler: () => {} });
const anything = defineJob({ name: "anything", schema: z.any(), handler: () => {} });
const dated = defineJob({ name: "dated", schema: z.object({ when: z.date() }), handler: () => {} });
const coerced = defineJob({ name: "coerced", schema: z.object({ when: z.coerce.date() }), handler: () => {} });
/** Accepts 0 but not -0: JSON stores -0 as 0, so only the value as given passes. */
const notZero = defineJob({ name: "not-zero", schema: z.object({ n: z.number().refine((n) => !Object.is(n, 0), "must not be 0") }), handler: () => {} });
/** Accepts `{ k: undefined }` as given (the key is there); JSON drops the key, so not as stored. */
const needsKey = defineJob({ name: "needs-key", schema: z.object({ k: z.any() }), handler: () => {} });
/** Made without defineJob, so its defaults were never checked. */
const handMade = { ...anything, name: "hand-made", leaseMs: 1e10 } as JobType;

/** Valid Unicode of every plane (astral too), and now and then the text `\u0000` (a backslash, then u0000). */
const storableChar = fc.oneof(
  { weight: 20, arbitrary: fc.integer({ min: 1, max: 0x10ffff }).filter((c) => c < 0xd800 || c > 0xdfff).map((c) => String.fromCodePoint(c)) },
  { weight: 1, arbitrary: fc.constant("\\u0000") },
);
/** At most 20 characters of up to 6 code units: within every text field's length limit. */
const storableString = (minLength = 0) => fc.string({ unit: storableChar, minLength, maxLength: 20 });
/** Any JSON a job can store; -0 is written as 0, since JSON has no -0. */
const storableJson = fc.jsonValue({ stringUnit: storableChar, maxDepth: 4 }).map((v) => JSON.parse(JSON.stringify(v)) as unknown);

class Money {
  constructor(readonly cents: number) {}
}
/** One of each value JSON cannot carry exactly, what the error must say, and where in the value the problem is. */
const hostileValues: [string, () => unknown, RegExp, (string | number)[]?][] = [
  ["a function", () => () => 1, /function/],
  ["a symbol", () => Symbol("s"), /symbol/],
  ["a bigint", () => 10n, /bigint/],
  ["a Map", () => new Map([["a", 1]]), /Map/],
  ["a Set", () => new Set([1]), /Set/],
  ["NaN", () => NaN, /NaN/],
  ["Infinity", () => Infinity, /Infinity/],
  ["a Date", () => new Date(0), /ISO strings/],
  ["a class instance", () => new Money(5), /Money/],
  ["a lone high surrogate", () => "a\ud800b", /lone UTF-16 surrogate/],
  ["a lone low surrogate", () => "\udc00", /lone UTF-16 surrogate/],
  ["a NUL character", () => "a\u0000b", /NUL/],
  ["undefined in an array", () => [1, undefined], /undefined/, [1]],
  ["an empty array slot", () => [1, , 2], /empty array slot/, [1]], // eslint-disable-line no-sparse-arrays
];

const refusal = async (attempt: Promise<unknown>): Promise<ValidationError> => {
  const err = await attempt.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(ValidationError);
  return err as ValidationError;
};

describe.each(drivers)("enqueue stores exactly what it was given (%s driver)", (driver) => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb(driver);
  });
  afterAll(() => t.drop());

  it("round-trips every storable payload, dedupe key, queue and group exactly, and keeps different keys apart", async () => {
    await fc.assert(
      fc.asyncProperty(storableJson, storableString(1), storableString(1), storableString(1), async (value, dedupeKey, queue, group) => {
        const given = await enqueue(t, loose, { value }, { dedupeKey, queue, group });
        const { rows } = await t.db.query<{ payload: unknown; dedupe_key: string; queue: string; group_key: string }>(
          `select payload, dedupe_key, queue, group_key from "${t.schema}".jobs where id = $1::bigint`, [given.id],
        );
        // What the handler gets: the stored payload through the job's schema.
        expect(loose.schema.parse(rows[0]!.payload)).toEqual({ value });
        expect(rows[0]).toMatchObject({ dedupe_key: dedupeKey, queue, group_key: group });
        // An equal key finds this job; a different key (one more character) does not.
        expect(await enqueue(t, loose, { value: 1 }, { dedupeKey })).toEqual({ id: given.id, existing: true });
        expect((await enqueue(t, loose, { value: 1 }, { dedupeKey: `${dedupeKey}\u{1F600}` })).id).not.toBe(given.id);
        await t.db.query(`delete from "${t.schema}".jobs where dedupe_key in ($1::text, $2::text)`, [dedupeKey, `${dedupeKey}\u{1F600}`]);
      }),
      { numRuns: driver === "pg" ? 100 : 30 },
    );
  });

  it("round-trips a batch exactly: every payload, queue and group through the one-statement insert, in order", async () => {
    // Text an array literal must quote or escape, beside any storable text.
    const awkward = fc.constantFrom("NULL", "null", " ", "a,b", "{x}", 'say "hi"', "back\\slash", "\\\"", "'");
    const text = fc.oneof(storableString(1), awkward);
    const spec = fc.record({ value: storableJson, queue: text, group: fc.option(text, { nil: undefined }) });
    await fc.assert(
      fc.asyncProperty(fc.array(spec, { minLength: 2, maxLength: 6 }), async (specs) => {
        const given = await enqueueJobs(t, specs.map(({ value, queue, group }) => job(loose, { value }, { queue, group })));
        const { rows } = await t.db.query<{ id: string; payload: unknown; queue: string; group_key: string | null }>(
          `select id::text, payload, queue, group_key from "${t.schema}".jobs where id = any($1::bigint[]) order by jobs.id`, [given.map((g) => g.id)],
        );
        expect(rows.map((r) => r.id)).toEqual(given.map((g) => g.id));
        rows.forEach((r, i) => {
          expect(loose.schema.parse(r.payload)).toEqual({ value: specs[i]!.value });
          expect(r).toMatchObject({ queue: specs[i]!.queue, group_key: specs[i]!.group ?? null });
        });
        await t.db.query(`delete from "${t.schema}".jobs where id = any($1::bigint[])`, [given.map((g) => g.id)]);
      }),
      { numRuns: driver === "pg" ? 40 : 10 },
    );
  });

  it("keeps the text \\u0000 (a backslash, then u0000) as text", async () => {
    const text = "before \\u0000 after";
    const { id } = await enqueue(t, loose, { value: text }, { dedupeKey: text });
    const { rows } = await t.db.query<{ payload: { value: string }; dedupe_key: string }>(
      `select payload, dedupe_key from "${t.schema}".jobs where id = $1::bigint`, [id],
    );
    expect(rows[0]).toEqual({ payload: { value: text }, dedupe_key: text });
  });

  it("stores runAt exactly at both ends of the range it accepts", async () => {
    for (const runAt of [new Date(MIN_RUN_AT_MS), new Date(8.64e15)]) {
      const { id } = await enqueue(t, anything, {}, { runAt });
      const { rows } = await t.db.query<{ run_at: Date }>(`select run_at from "${t.schema}".jobs where id = $1::bigint`, [id]);
      expect(rows[0]!.run_at.getTime()).toBe(runAt.getTime());
    }
  });
});

describe("enqueue refuses what it cannot store exactly, names the field, and writes nothing", () => {
  let t: TestDb;
  const count = async () => (await t.admin.query<{ n: number }>(`select count(*)::int as n from "${t.schema}".jobs`)).rows[0]!.n;
  beforeAll(async () => {
    t = await createTestDb("pg");
    await enqueue(t, anything, { there: "before" });
  });
  afterAll(() => t.drop());

  const serving = servingRules(defaultConfig);
  const huge = "x".repeat(1024 * 1024);
  const cases: { what: string; run: () => Promise<unknown>; path: (string | number)[]; says: RegExp }[] = [
    ...hostileValues.map(([what, make, says, within = []]) => ({
      what: `${what} inside a payload`, run: () => enqueue(t, anything, { a: { b: make() } }), path: ["payload", "a", "b", ...within], says,
    })),
    { what: "a function as the payload", run: () => enqueue(t, anything, (() => 1) as unknown), path: ["payload"], says: /function/ },
    { what: "a symbol as the payload", run: () => enqueue(t, anything, Symbol("s") as unknown), path: ["payload"], says: /symbol/ },
    { what: "a lone surrogate in a payload key", run: () => enqueue(t, anything, { "k\ud800": 1 }), path: ["payload", "k\ud800"], says: /key must be valid Unicode/ },
    { what: "symbol keys in a payload", run: () => enqueue(t, anything, { [Symbol("s")]: 1 }), path: ["payload"], says: /symbol keys/ },
    { what: "a payload that refers to itself", run: () => { const o: Record<string, unknown> = {}; o.self = o; return enqueue(t, anything, o); }, path: ["payload", "self"], says: /cycle/ },
    { what: "a payload nested 64 levels deep", run: () => enqueue(t, anything, JSON.parse("[".repeat(65) + "]".repeat(65))), path: ["payload"], says: /deeper than 64/ },
    { what: "a payload over 1 MB of JSON", run: () => enqueue(t, anything, { huge }), path: ["payload"], says: /^is 10485\d\d bytes of JSON; at most 1048576 are allowed$/ },
    { what: "a Date for a z.date() field, in a batch", run: () => enqueueJobs(t, [job(anything, 1), job(anything, 2), job(anything, 3), job(dated, { when: new Date() })]), path: ["jobs", 3, "payload", "when"], says: /ISO strings/ },
    { what: "a payload its schema accepts only as given, not as stored", run: () => enqueue(t, notZero, { n: -0 }), path: ["payload", "n"], says: /as stored \(JSON\): must not be 0/ },
    { what: "a non-enumerable key its schema reads (JSON drops it)", run: () => enqueue(t, needsKey, Object.defineProperty({}, "k", { value: 1, enumerable: false }) as { k: number }), path: ["payload", "k"], says: /^as stored \(JSON\): / },
    { what: "a key set to undefined that its schema needs, in a batch (JSON drops it)", run: () => enqueueJobs(t, [job(anything, 1), job(needsKey, { k: undefined })]), path: ["jobs", 1, "payload", "k"], says: /^as stored \(JSON\): / },
    { what: "a lone surrogate in a dedupe key", run: () => enqueue(t, anything, {}, { dedupeKey: "k\ud800" }), path: ["dedupeKey"], says: /lone UTF-16 surrogate/ },
    { what: "a NUL in a dedupe key", run: () => enqueue(t, anything, {}, { dedupeKey: "k\u0000" }), path: ["dedupeKey"], says: /NUL/ },
    { what: "a lone surrogate in a queue", run: () => enqueue(t, anything, {}, { queue: "\udfff" }), path: ["queue"], says: /lone UTF-16 surrogate/ },
    { what: "a NUL in a queue", run: () => enqueue(t, anything, {}, { queue: "q\u0000" }), path: ["queue"], says: /NUL/ },
    { what: "a lone surrogate in a group", run: () => enqueue(t, anything, {}, { group: "g\ud800" }), path: ["group"], says: /lone UTF-16 surrogate/ },
    { what: "a NUL in a group", run: () => enqueue(t, anything, {}, { group: "\u0000" }), path: ["group"], says: /NUL/ },
    { what: "a runAt before Postgres' earliest time", run: () => enqueue(t, anything, {}, { runAt: new Date(MIN_RUN_AT_MS - 1) }), path: ["runAt"], says: /4714-11-24 BC/ },
    { what: "an invalid runAt", run: () => enqueue(t, anything, {}, { runAt: new Date(NaN) }), path: ["runAt"], says: /./ },
    { what: "a delayMs over a year", run: () => enqueue(t, anything, {}, { delayMs: 366 * 24 * 3600_000 }), path: ["delayMs"], says: /./ },
    { what: "a priority past smallint", run: () => enqueue(t, anything, {}, { priority: 1e6 }), path: ["priority"], says: /./ },
    { what: "a batch spec without a job type", run: () => enqueueJobs(t, [job(anything, 1), { payload: {} } as JobSpec]), path: ["jobs", 1, "type"], says: /job type/ },
    { what: "a batch spec that is null", run: () => enqueueJobs(t, [null as unknown as JobSpec, job(anything, 1)]), path: ["jobs", 0, "type"], says: /job type/ },
    { what: "a job type made by hand with a lease past 2^31", run: () => enqueue(t, handMade, {}), path: ["type", "leaseMs"], says: /./ },
    { what: "a job type made by hand with a lease under the minimum", run: () => enqueue(t, { ...anything, name: "hand-brief", leaseMs: 500 } as JobType, {}), path: ["type", "leaseMs"], says: /at least 1000ms \(MIN_LEASE_MS\)/ },
    { what: "a queue no runner serves", run: () => enqueue(t, anything, {}, { queue: "nowhere" }, { serving }), path: ["queue"], says: /no runner serves queue "nowhere"/ },
    { what: "a lease longer than its runner's maxLeaseMs", run: () => enqueue(t, defineJob({ name: "long", schema: z.any(), leaseMs: 120_000, handler: () => {} }), {}, undefined, { serving }), path: ["queue"], says: /120000ms lease is longer than the 60000ms \(maxLeaseMs\)/ },
    { what: "a follow-up claimed at once with a dedupe key", run: () => enqueueClaimed(t, job(anything, {}, { dedupeKey: "k" }), "runner-1"), path: ["dedupeKey"], says: /run now, without a dedupe key/ },
    { what: "a follow-up claimed at once with a payload that is not JSON", run: () => enqueueClaimed(t, job(anything, { n: NaN }), "runner-1"), path: ["payload", "n"], says: /NaN/ },
  ];

  it.each(cases)("$what", async ({ run, path, says }) => {
    const before = await count();
    const err = await refusal(run());
    expect(err.issues[0]!.path).toEqual(path);
    expect(err.issues[0]!.message).toMatch(says);
    expect(err.message).toContain(path.join("."));
    expect(await count()).toBe(before);
  });

  it("refuses every non-JSON value, wherever it is in a payload, naming its path", async () => {
    const key = fc.string({ unit: storableChar, minLength: 1, maxLength: 8 });
    const hostile = fc.constantFrom(...hostileValues);
    // A path of object keys and array indexes down to the hostile value.
    const step = fc.oneof(key, fc.nat({ max: 3 }));
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 5 }), hostile, storableJson, async (path, [, make, says, within = []], sibling) => {
        let payload: unknown = make();
        for (const at of [...path].reverse()) {
          if (typeof at === "number") payload = [...Array.from({ length: at }, () => sibling), payload];
          else payload = { [`${at}~`]: sibling, [at]: payload };
        }
        const before = await count();
        const err = await refusal(enqueue(t, anything, payload));
        expect(err.issues.map((i) => i.path)).toEqual([["payload", ...path, ...within]]);
        expect(err.issues[0]!.message).toMatch(says);
        expect(await count()).toBe(before);
      }),
      { numRuns: 200 },
    );
  });

  it("refuses a dedupe key, queue or group with a lone surrogate or NUL anywhere in it", async () => {
    const bad = fc.tuple(storableString(), fc.constantFrom("\u0000", "\ud800", "\udbff", "\udc00", "\udfff"), storableString()).map((p) => p.join(""));
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("dedupeKey", "queue", "group"), bad, async (field, text) => {
        const before = await count();
        const err = await refusal(enqueue(t, anything, {}, { [field]: text }));
        expect(err.issues[0]!.path).toEqual([field]);
        expect(await count()).toBe(before);
      }),
      { numRuns: 100 },
    );
  });

  it("measures the payload limit in bytes of UTF-8, and takes a configured limit", async () => {
    const limits: EnqueueLimits = { maxPayloadBytes: 20 };
    // {"s":"…"} is 8 bytes around the text: 3 two-byte, 1 four-byte and 2 one-byte characters make 20.
    await expect(enqueue(t, anything, { s: "ééé😀ab" }, undefined, limits)).resolves.toMatchObject({ existing: false });
    const err = await refusal(enqueue(t, anything, { s: "ééé😀abc" }, undefined, limits));
    expect(err.issues[0]).toEqual({ path: ["payload"], message: "is 21 bytes of JSON; at most 20 are allowed" });
  });

  it("takes a date as an ISO string, for a schema that coerces it to a Date", async () => {
    const when = new Date("2030-01-02T03:04:05.678Z");
    const { id } = await enqueue(t, coerced, { when: when.toISOString() });
    const { rows } = await t.db.query<{ payload: unknown }>(`select payload from "${t.schema}".jobs where id = $1::bigint`, [id]);
    expect(coerced.schema.parse(rows[0]!.payload)).toEqual({ when });
  });
});

describe("defineJob holds every default to enqueue's bounds", () => {
  const base = { name: "bounded", schema: z.object({}), handler: () => {} };
  const serving = servingRules(defaultConfig);
  it.each([
    { field: "maxAttempts", value: 0 },
    { field: "maxAttempts", value: 1001 },
    { field: "leaseMs", value: 1e10 },
    { field: "leaseMs", value: 0 },
    { field: "leaseMs", value: 999 },
    { field: "leaseMs", value: 1.5 },
    { field: "priority", value: 1e6 },
    { field: "backoffMs", value: NaN },
    { field: "backoffMs", value: -1 },
    { field: "backoffMs", value: 3_600_001 },
    { field: "queue", value: "" },
    { field: "queue", value: "q\u0000" },
    { field: "queue", value: "q\ud800" },
    { field: "name", value: "has space" },
  ])("refuses $field: $value", ({ field, value }) => {
    const define = () => defineJob({ ...base, [field]: value });
    expect(define).toThrow(ValidationError);
    try {
      define();
    } catch (err) {
      expect((err as ValidationError).issues[0]!.path).toEqual([field]);
      expect((err as ValidationError).message).toContain(field);
    }
  });

  it("refuses an option it does not know, naming it, instead of ignoring it", () => {
    const refusal = (definition: object) => {
      try {
        defineJob(definition as Parameters<typeof defineJob>[0]);
      } catch (err) {
        expect(err).toBeInstanceOf(ValidationError);
        return err as ValidationError;
      }
      throw new Error("accepted");
    };
    // A feature Leasehold does not have (a burst beside a rate limit) is named, not ignored.
    const bursting = refusal({ ...base, rateLimit: { limit: 10, periodMs: 1_000, burst: 5 } });
    expect(bursting.issues).toEqual([{ path: ["rateLimit", "burst"], message: expect.stringContaining('unknown option "burst"') }]);
    expect(bursting.message).toContain('invalid job type "bounded"');
    const retrying = refusal({ ...base, retryPolicy: "exponential" });
    expect(retrying.issues).toEqual([{ path: ["retryPolicy"], message: expect.stringContaining('unknown option "retryPolicy"') }]);
    // A misspelling: every unknown key is named, and the known ones listed.
    const misspelt = refusal({ ...base, maxAtempts: 3, leaseMS: 1_000 });
    expect(misspelt.issues.map((i) => i.path)).toEqual([["maxAtempts"], ["leaseMS"]]);
    expect(misspelt.issues[0]!.message).toContain("maxAttempts");
    // Inside the concurrency limit too.
    const keyed = refusal({ ...base, concurrency: { limit: 2, keyBy: () => "k" } });
    expect(keyed.issues).toEqual([{ path: ["concurrency", "keyBy"], message: expect.stringContaining("known: limit, key") }]);
    // Every known option is still taken.
    expect(defineJob({ ...base, queue: "q", maxAttempts: 2, leaseMs: 1_000, backoffMs: 0, priority: 1, concurrency: { limit: 1, key: () => "k" }, fair: false }))
      .toMatchObject({ name: "bounded", queue: "q", fair: false });
  });

  it("accepts the bounds themselves", () => {
    expect(() => defineJob({ ...base, maxAttempts: 1000, leaseMs: 895_000, priority: -32768, backoffMs: 0 })).not.toThrow();
    expect(() => defineJob({ ...base, leaseMs: MIN_LEASE_MS })).not.toThrow();
  });

  it("refuses a lease under MIN_LEASE_MS, saying why and naming the field", () => {
    expect(() => defineJob({ ...base, leaseMs: 150 })).toThrow(ValidationError);
    try {
      defineJob({ ...base, leaseMs: 150 });
    } catch (err) {
      expect((err as ValidationError).issues).toEqual([
        { path: ["leaseMs"], message: "must be at least 1000ms (MIN_LEASE_MS): a shorter lease cannot hold a settle under faults" },
      ]);
      expect((err as ValidationError).message).toContain("leaseMs: must be at least 1000ms");
    }
  });

  it("given the deployment's serving rules, refuses a queue no runner serves and a lease its runner cannot hold", () => {
    expect(() => defineJob({ ...base, queue: "cpu", leaseMs: 60_000 }, serving)).not.toThrow();
    const issue = (definition: object) => {
      try {
        defineJob({ ...base, ...definition }, serving);
      } catch (err) {
        return (err as ValidationError).issues[0];
      }
      return undefined;
    };
    expect(issue({ queue: "nowhere" })).toMatchObject({ path: ["queue"], message: expect.stringContaining('no runner serves queue "nowhere"') });
    expect(issue({ leaseMs: 60_001 })).toMatchObject({ path: ["leaseMs"], message: expect.stringContaining("maxLeaseMs") });
  });
});
