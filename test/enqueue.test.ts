import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { defineJob } from "../shared/jobs/job.ts";
import { transaction, type Queryable } from "../shared/db/db.ts";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { ValidationError } from "../shared/errors.ts";
import { createTestDb, drivers, type TestDb } from "./support/db.ts";
import { email, noop } from "./support/jobs.ts";

describe.each(drivers)("enqueue (%s driver)", (driver) => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb(driver);
  });
  afterAll(() => t.drop());

  const count = async (where = "true", values: unknown[] = []) => {
    const { rows } = await t.admin.query<{ n: number }>(`select count(*)::int as n from "${t.schema}".jobs where ${where}`, values);
    return rows[0]!.n;
  };

  it("writes one job with its type's defaults", async () => {
    const { id, existing } = await enqueue(t, email, { to: "a@example.com", userId: 1 });
    expect(existing).toBe(false);
    const { rows } = await t.admin.query(`select * from "${t.schema}".jobs where id = $1`, [id]);
    expect(rows[0]).toMatchObject({
      queue: "mail", name: "email.welcome", status: "queued", attempts: 0, max_attempts: 5, lease_ms: 10_000,
      payload: { to: "a@example.com", userId: 1 },
    });
  });

  it("stores a job enqueued alone exactly as the same job in a batch", async () => {
    // One job takes its own statement; a batch the array one. Every column must agree.
    const limited = defineJob({
      name: "alone-or-batched", schema: z.object({ tenant: z.string() }), queue: "alone", handler: () => {},
      concurrency: { limit: 2, key: (p) => p.tenant },
    });
    const variants = [
      job(noop, { n: 1 }, { queue: "alone" }),
      job(noop, { n: 2 }, { queue: "alone", runAt: new Date("2031-02-03T04:05:06.789Z"), priority: -3, maxAttempts: 7 }),
      job(noop, { n: 3 }, { queue: "alone", delayMs: 60_000, group: "tenant-a", priority: 5 }),
      job(limited, { tenant: "t1" }, { group: "g1" }),
    ];
    const columns = `queue, name, payload, priority, max_attempts, lease_ms, backoff_ms, group_key, dedupe_key, fair_group,
      concurrency_key, concurrency_limit, status, attempts, extract(epoch from run_at - created_at) as delay_s, run_at`;
    for (const spec of variants) {
      const [alone] = await enqueueJobs(t, [spec]);
      const [batched] = await enqueueJobs(t, [spec, spec]);
      const read = async (id: string) => (await t.admin.query<Record<string, unknown>>(`select ${columns} from "${t.schema}".jobs where id = $1`, [id])).rows[0]!;
      const [a, b] = [await read(alone!.id), await read(batched!.id)];
      if (spec.options?.delayMs) {
        // Each is delayed from its own insert's now().
        expect(Number(a.delay_s)).toBeCloseTo(60, 0);
        expect(Number(b.delay_s)).toBeCloseTo(60, 0);
        delete a.delay_s; delete a.run_at; delete b.delay_s; delete b.run_at;
      } else if (!spec.options?.runAt) {
        delete a.delay_s; delete a.run_at; delete b.delay_s; delete b.run_at;
      } else {
        delete a.delay_s; delete b.delay_s;
      }
      expect(a).toEqual(b);
    }
  });

  it("writes 10,000 jobs in one round trip", async () => {
    let queries = 0;
    const counting: Queryable = { query: (text, values) => (queries++, t.db.query(text, values)) };
    const before = await count("name = 'noop'");
    const specs = Array.from({ length: 10_000 }, (_, n) => job(noop, { n }));
    const result = await enqueueJobs({ db: counting, schema: t.schema }, specs);
    expect(queries).toBe(1);
    expect(result).toHaveLength(10_000);
    expect(new Set(result.map((r) => r.id)).size).toBe(10_000);
    expect((await count("name = 'noop'")) - before).toBe(10_000);
    // Results come back in the order given.
    const { rows } = await t.admin.query<{ n: number }>(
      `select (payload->>'n')::int as n from "${t.schema}".jobs where id = any($1::bigint[]) order by id`,
      [[result[0]!.id, result[9_999]!.id]],
    );
    expect(rows.map((r) => r.n)).toEqual([0, 9_999]);
  });

  it("joins the caller's transaction: a rollback leaves no job, a commit keeps it", async () => {
    const before = await count();
    await expect(
      transaction(t.pool, async (tx) => {
        await enqueue({ db: tx, schema: t.schema }, noop, { n: -1 });
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    expect(await count()).toBe(before);
    await transaction(t.pool, (tx) => enqueue({ db: tx, schema: t.schema }, noop, { n: -2 }));
    expect(await count()).toBe(before + 1);
  });

  it("delays by runAt or delayMs, and takes priority and group", async () => {
    const runAt = new Date(Date.now() + 3_600_000);
    const a = await enqueue(t, noop, { n: 1 }, { runAt, priority: 7, group: "tenant-a" });
    const b = await enqueue(t, noop, { n: 2 }, { delayMs: 60_000 });
    const { rows } = await t.admin.query<{ id: string; run_at: Date; priority: number; group_key: string | null; created_at: Date }>(
      `select id::text, run_at, priority, group_key, created_at from "${t.schema}".jobs where id = any($1::bigint[]) order by id`,
      [[a.id, b.id]],
    );
    expect(rows[0]!.run_at.getTime()).toBe(runAt.getTime());
    expect(rows[0]).toMatchObject({ priority: 7, group_key: "tenant-a" });
    const delay = rows[1]!.run_at.getTime() - rows[1]!.created_at.getTime();
    expect(delay).toBeGreaterThanOrEqual(59_999);
    expect(delay).toBeLessThanOrEqual(60_001);
  });

  it("returns the pending job for an equal dedupe key, race-free", async () => {
    const key = `dedupe-${driver}`;
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, n) => enqueue(t, noop, { n }, { dedupeKey: key })),
    );
    const ids = new Set(results.map((r) => r.id));
    expect(ids.size).toBe(1);
    expect(results.filter((r) => !r.existing)).toHaveLength(1);
    expect(await count("dedupe_key = $1", [key])).toBe(1);
    // Once the first is no longer pending, the key is free again.
    await t.admin.query(`update "${t.schema}".jobs set status = 'cancelled' where dedupe_key = $1`, [key]);
    const again = await enqueue(t, noop, { n: 0 }, { dedupeKey: key });
    expect(again.existing).toBe(false);
    expect(ids.has(again.id)).toBe(false);
  });

  it("rejects a bad payload naming the field, and writes nothing", async () => {
    const before = await count();
    const err = await enqueue(t, email, { to: "not-an-email", userId: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues[0]!.path).toEqual(["payload", "to"]);
    expect((err as ValidationError).message).toContain("payload.to");
    expect(await count()).toBe(before);
  });

  it("rejects a whole batch when one payload is bad, naming which", async () => {
    const before = await count();
    const err = await enqueueJobs(t, [
      job(noop, { n: 1 }),
      job(noop, { n: 1.5 }),
    ]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues[0]!.path).toEqual(["jobs", 1, "payload", "n"]);
    expect(await count()).toBe(before);
  });

  it("rejects bad options and duplicate keys in one batch, and writes nothing", async () => {
    const before = await count();
    const bad = await enqueue(t, noop, { n: 1 }, { maxAttempts: 0 }).catch((e: unknown) => e);
    expect((bad as ValidationError).issues[0]!.path).toEqual(["maxAttempts"]);
    const dup = await enqueueJobs(t, [
      job(noop, { n: 1 }, { dedupeKey: "k" }),
      job(noop, { n: 2 }, { dedupeKey: "k" }),
    ]).catch((e: unknown) => e);
    expect((dup as ValidationError).issues[0]!.path).toEqual(["jobs", 1, "dedupeKey"]);
    expect(await count()).toBe(before);
  });
});

describe("enqueue refuses payloads Postgres cannot store", () => {
  it("names a NUL character and a circular payload as validation errors, before any write", async () => {
    const { z } = await import("zod");
    const { defineJob } = await import("../shared/jobs/job.ts");
    const loose = defineJob({ name: "loose", schema: z.any(), handler: () => {} });
    const nowhere: Queryable = { query: () => Promise.reject(new Error("must not be reached")) };
    const nul = await enqueue({ db: nowhere, schema: "x" }, loose, { s: "a\u0000b" }).catch((e: unknown) => e);
    expect(nul).toBeInstanceOf(ValidationError);
    expect((nul as ValidationError).issues[0]!.path).toEqual(["payload", "s"]);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const circ = await enqueue({ db: nowhere, schema: "x" }, loose, circular).catch((e: unknown) => e);
    expect(circ).toBeInstanceOf(ValidationError);
  });
});
