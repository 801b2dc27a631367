import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import type { Pool, Store } from "../shared/db/db.ts";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob, type EnqueuedJob } from "../shared/jobs/job.ts";
import { failJobs } from "../shared/lifecycle/settle.ts";
import { countReady, pruneJobs } from "../shared/observe/stats.ts";
import { nextDue } from "../shared/scheduler/due.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { createPool, createTestDb, drivers, passTime, type TestDb } from "./support/db.ts";

/** Every handler start, as the handlers saw it: job id and the payload it got. */
type Start = { id: string; n: number };

function jobTypes(starts: Start[]) {
  const record = (payload: { n: number }, ctx: { jobId: string }) => void starts.push({ id: ctx.jobId, n: payload.n });
  return {
    reindex: defineJob({ name: "reindex", queue: "flow", schema: z.object({ doc: z.string(), n: z.number().int() }), handler: record }),
    notify: defineJob({ name: "notify", queue: "flow", schema: z.object({ doc: z.string(), n: z.number().int() }), handler: record }),
  };
}

/** Runs the flow queue's due jobs until nothing has been claimable for `idleMs`. */
const drain = (t: Store, registry: ReturnType<typeof createRegistry>, idleMs = 1_000) =>
  runWorker({ linger: "fixed", store: t, registry, queues: ["flow"], runnerId: "drain", slots: 8, remainingMs: () => 600_000, idleMs, pollMs: 100 });

describe.each(drivers)("debounce and throttle under concurrent enqueues, %s driver", (driver) => {
  const POOLS = 20;
  const CALLS = 10;
  const KEYS = 4;
  let t: TestDb;
  let pools: Pool[];
  const starts: Start[] = [];
  const types = jobTypes(starts);
  const registry = createRegistry([types.reindex, types.notify]);
  beforeAll(async () => {
    t = await createTestDb(driver, 4);
    pools = Array.from({ length: POOLS }, () => createPool(driver, 2));
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await t.drop();
  });

  /** `CALLS` enqueues from each of `POOLS` pools at once, keys spread over `KEYS`; results by key. */
  async function burst(round: number, options: (key: string) => object, type = types.reindex) {
    const calls = pools.flatMap((pool, p) =>
      Array.from({ length: CALLS }, (_, c) => {
        const key = `r${round}-k${(p + c) % KEYS}`;
        const n = p * CALLS + c;
        return { key, n, done: enqueue({ db: pool, schema: t.schema }, type, { doc: key, n }, options(key)) };
      }),
    );
    const byKey = new Map<string, { n: number; result: EnqueuedJob }[]>();
    for (const { key, n, done } of calls) byKey.set(key, [...(byKey.get(key) ?? []), { n, result: await done }]);
    return byKey;
  }

  const jobsOf = async (name: string, prefix: string) =>
    (await t.admin.query<{ id: string; doc: string; n: number; status: string }>(
      `select id::text, payload->>'doc' as doc, (payload->>'n')::int as n, status::text from "${t.schema}".jobs
       where name = $1 and payload->>'doc' like $2 order by id`, [name, `${prefix}%`])).rows;

  it(`debounce: ${POOLS} pools x ${CALLS} enqueues at once, three rounds: one job stands per key each round, every call returns it, one call created it, and it runs once`, async () => {
    for (let round = 0; round < 3; round++) {
      const byKey = await burst(round, (key) => ({ debounce: { key, periodMs: 1_000 } }));
      const jobs = await jobsOf("reindex", `r${round}-`);
      expect(jobs.map((j) => j.doc).sort()).toEqual([...byKey.keys()].sort());
      for (const [key, calls] of byKey) {
        const standing = jobs.find((j) => j.doc === key)!;
        expect(new Set(calls.map((c) => c.result.id))).toEqual(new Set([standing.id]));
        expect(calls.filter((c) => !c.result.existing)).toHaveLength(1);
        expect(calls.filter((c) => c.result.debounced)).toHaveLength(calls.length - 1);
        // The payload is one of this key's enqueues (the last one written).
        expect(calls.map((c) => c.n)).toContain(standing.n);
      }
      // The period passes in the database: the round's jobs are due now, not a second from now.
      expect(await passTime(t, 1_000, "name = 'reindex' and payload->>'doc' like $1", [`r${round}-%`])).toBe(jobs.length);
      await drain(t, registry);
      const ran = starts.filter((s) => jobs.some((j) => j.id === s.id));
      expect(ran.map((s) => s.id).sort()).toEqual(jobs.map((j) => j.id).sort());
      expect(ran.map((s) => s.n).sort()).toEqual(jobs.map((j) => j.n).sort());
    }
  });

  it(`throttle: ${POOLS} pools x ${CALLS} enqueues at once: one job stands per key, every call returns it, it carries the first payload written, and it runs once`, async () => {
    const byKey = await burst(10, (key) => ({ throttle: { key, periodMs: 600_000 } }), types.notify);
    const jobs = await jobsOf("notify", "r10-");
    expect(jobs.map((j) => j.doc).sort()).toEqual([...byKey.keys()].sort());
    for (const [key, calls] of byKey) {
      const standing = jobs.find((j) => j.doc === key)!;
      expect(new Set(calls.map((c) => c.result.id))).toEqual(new Set([standing.id]));
      const created = calls.filter((c) => !c.result.existing);
      expect(created).toHaveLength(1);
      expect(standing.n).toBe(created[0]!.n);
      expect(calls.filter((c) => c.result.throttled)).toHaveLength(calls.length - 1);
    }
    await drain(t, registry, 1_000);
    expect(starts.filter((s) => jobs.some((j) => j.id === s.id)).map((s) => s.id).sort()).toEqual(jobs.map((j) => j.id).sort());
  });

  it("throttle under enqueues spread over several windows: per key, jobs stand at least periodMs apart, and each call got one of its key's jobs", async () => {
    const PERIOD_MS = 2_000;
    const STEP_MS = 700;
    // Six steps STEP_MS apart, each every pool's enqueue at once; between steps the time passes in the
    // database (created_at, run_at and the windows' ends move back together), not on the clock.
    const results: { key: string; result: EnqueuedJob }[] = [];
    for (let c = 0; c < 6; c++) {
      if (c > 0) await passTime(t, STEP_MS, "name = 'notify' and payload->>'doc' like 'w-%'");
      results.push(...(await Promise.all(pools.map(async (pool, p) => {
        const key = `w-k${(p + c) % 2}`;
        return { key, result: await enqueue({ db: pool, schema: t.schema }, types.notify, { doc: key, n: p }, { throttle: { key, periodMs: PERIOD_MS } }) };
      }))));
    }
    const { rows } = await t.admin.query<{ id: string; doc: string; ms: number; window_ms: number }>(
      `select j.id::text, j.payload->>'doc' as doc, extract(epoch from j.created_at) * 1000 as ms,
              extract(epoch from w.window_ends_at - j.created_at) * 1000 as window_ms
       from "${t.schema}".jobs j left join "${t.schema}".throttle_windows w on w.job_id = j.id
       where j.name = 'notify' and j.payload->>'doc' like 'w-%' order by j.created_at`);
    for (const key of ["w-k0", "w-k1"]) {
      const jobs = rows.filter((r) => r.doc === key);
      expect(jobs.length).toBeGreaterThanOrEqual(2); // the calls span more than one window
      // Steps at 0, 0.7, 1.4, 2.1, 2.8 and 3.5 s: a window at 0 and one at 2.1.
      expect(jobs).toHaveLength(2);
      for (let i = 1; i < jobs.length; i++) expect(jobs[i]!.ms - jobs[i - 1]!.ms).toBeGreaterThanOrEqual(PERIOD_MS);
      const mine = results.filter((r) => r.key === key);
      expect(mine.filter((r) => !r.result.existing)).toHaveLength(jobs.length);
      expect(mine.every((r) => jobs.some((j) => j.id === r.result.id))).toBe(true);
    }
    // The window standing now was opened by its job's enqueue, and lasts periodMs from it.
    expect(rows.filter((r) => r.window_ms !== null).map((r) => Number(r.window_ms))).toEqual([PERIOD_MS, PERIOD_MS]);
  });
});

describe("debounce and throttle, one connection", () => {
  let t: TestDb;
  const starts: Start[] = [];
  const types = jobTypes(starts);
  beforeAll(async () => {
    t = await createTestDb("pg", 4);
  });
  afterAll(() => t.drop());

  const read = async (id: string) =>
    (await t.admin.query<{ n: number; status: string; run_ms: number; created_ms: number; deadline_ms: number }>(
      `select (payload->>'n')::int as n, status::text, extract(epoch from run_at)::float8 * 1000 as run_ms,
              extract(epoch from created_at)::float8 * 1000 as created_ms, extract(epoch from debounce_deadline)::float8 * 1000 as deadline_ms
       from "${t.schema}".jobs where id = $1::bigint`, [id])).rows[0]!;
  const dbNowMs = async () => Number((await t.admin.query<{ ms: number }>("select extract(epoch from clock_timestamp())::float8 * 1000 as ms")).rows[0]!.ms);

  it("moves the start to periodMs after the last enqueue, with the last payload, never earlier, and never past maxWaitMs after the first", async () => {
    const debounce = { key: "doc-1", periodMs: 10_000, maxWaitMs: 14_000 };
    const first = await enqueue(t, types.reindex, { doc: "d", n: 1 }, { debounce });
    expect(first).toEqual({ id: first.id, existing: false });
    const a = await read(first.id);
    expect(a.run_ms - a.created_ms).toBeCloseTo(10_000, 3);
    expect(a.deadline_ms - a.created_ms).toBeCloseTo(14_000, 3);

    // 1.5 s pass (in the database: the job's times move back).
    await passTime(t, 1_500, "id = $1::bigint", [first.id]);
    const a2 = await read(first.id);
    expect(a2.run_ms - a2.created_ms).toBeCloseTo(10_000, 3);
    const before = await dbNowMs();
    const second = await enqueue(t, types.reindex, { doc: "d", n: 2 }, { debounce });
    const after = await dbNowMs();
    expect(second).toEqual({ id: first.id, existing: true, debounced: true });
    const b = await read(first.id);
    expect(b.n).toBe(2);
    expect(b.run_ms).toBeGreaterThanOrEqual(before + 10_000);
    expect(b.run_ms).toBeLessThanOrEqual(after + 10_000);
    expect(b.run_ms - a2.run_ms).toBeGreaterThanOrEqual(1_000);

    // A shorter period on a later enqueue does not bring the start forward.
    await enqueue(t, types.reindex, { doc: "d", n: 3 }, { debounce: { ...debounce, periodMs: 1_000 } });
    const c = await read(first.id);
    expect(c.n).toBe(3);
    expect(c.run_ms).toBe(b.run_ms);

    // 4.5 s after the first enqueue, another 10 s would pass the 14 s deadline: the deadline holds.
    await passTime(t, 3_000, "id = $1::bigint", [first.id]);
    const shifted = await read(first.id);
    expect(await dbNowMs()).toBeGreaterThanOrEqual(shifted.created_ms + 4_500);
    await enqueue(t, types.reindex, { doc: "d", n: 4 }, { debounce });
    const d = await read(first.id);
    expect(d.run_ms).toBeCloseTo(shifted.created_ms + 14_000, 3);
    expect(d.n).toBe(4);
    const { rows } = await t.admin.query(`select 1 from "${t.schema}".jobs where debounce_key = 'doc-1'`);
    expect(rows).toHaveLength(1);
  });

  it("after a debounce moves a start, the scheduler's due time is the new start, and nothing counts as due at the old one", async () => {
    const can = { names: ["reindex"], maxLeaseMs: new Map([["flow", 60_000]]) };
    const debounce = { key: "due-1", periodMs: 3_000 };
    const { id } = await enqueue(t, types.reindex, { doc: "due", n: 1 }, { debounce });
    const first = await read(id);
    expect((await nextDue(t, can)).laterAt!.getTime()).toBeCloseTo(first.run_ms, -1);
    // 2 s pass, in the database.
    await passTime(t, 2_000, "id = $1::bigint", [id]);
    const old = await read(id);
    await enqueue(t, types.reindex, { doc: "due", n: 2 }, { debounce });
    const moved = await read(id);
    expect(moved.run_ms - old.run_ms).toBeGreaterThanOrEqual(1_500);
    // At the old start (what a scheduler that watched it wakes to), with startLeadMs of 1 s: nothing to start a runner for.
    await passTime(t, Math.max(0, old.run_ms - (await dbNowMs())), "id = $1::bigint", [id]);
    const atOld = await read(id);
    expect(await countReady(t, can, 100, 1_000)).toBe(0);
    const due = await nextDue(t, can);
    expect(due.laterAt!.getTime()).toBeCloseTo(atOld.run_ms, -1);
    // At the new start it is ready.
    await passTime(t, Math.max(0, atOld.run_ms - (await dbNowMs())), "id = $1::bigint", [id]);
    expect(await countReady(t, can, 100)).toBe(1);
    await t.admin.query(`update "${t.schema}".jobs set status = 'cancelled' where id = $1::bigint`, [id]);
  });

  it("a debounced job a runner has claimed is left alone: the next enqueue makes a new job, and the claimed one's retry queues beside it", async () => {
    const debounce = { key: "doc-2", periodMs: 60_000 };
    const first = await enqueue(t, types.reindex, { doc: "d", n: 1 }, { debounce });
    await t.admin.query(`update "${t.schema}".jobs set run_at = now() where id = $1::bigint`, [first.id]);
    const [claimed] = await claimJobs(t, { queue: "flow", runnerId: "r1", limit: 1, maxLeaseMs: 60_000 });
    expect(claimed!.id).toBe(first.id);

    const second = await enqueue(t, types.reindex, { doc: "d", n: 2 }, { debounce });
    expect(second.existing).toBe(false);
    expect(second.id).not.toBe(first.id);
    expect((await read(first.id)).n).toBe(1);

    // The claimed job fails and goes back to the queue: two queued jobs of one key, the retry never debounced.
    const failed = await failJobs(t, [{ id: claimed!.id, leaseToken: claimed!.leaseToken, outcome: "failed", error: "boom", retryDelayMs: 0 }]);
    expect([...failed]).toEqual([[first.id, "queued"]]);
    const third = await enqueue(t, types.reindex, { doc: "d", n: 3 }, { debounce });
    expect(third).toEqual({ id: second.id, existing: true, debounced: true });
    expect((await read(first.id))).toMatchObject({ n: 1, status: "queued" });
    expect((await read(second.id))).toMatchObject({ n: 3, status: "queued" });
  });

  it("throttle keeps the first job for periodMs from its enqueue, writes nothing for the rest, and a new window opens after", async () => {
    const throttle = { key: "user-1", periodMs: 2_000 };
    const first = await enqueue(t, types.notify, { doc: "t", n: 1 }, { throttle });
    const second = await enqueue(t, types.notify, { doc: "t", n: 2 }, { throttle });
    expect(first.existing).toBe(false);
    expect(second).toEqual({ id: first.id, existing: true, throttled: true });
    const a = await read(first.id);
    expect(a.n).toBe(1);
    // 2.5 s pass, in the database: the window has ended.
    await passTime(t, 2_500, "id = $1::bigint", [first.id]);
    const third = await enqueue(t, types.notify, { doc: "t", n: 3 }, { throttle });
    expect(third.existing).toBe(false);
    expect(third.id).not.toBe(first.id);
    const { rows } = await t.admin.query<{ n: number }>(
      `select (payload->>'n')::int as n from "${t.schema}".jobs where name = 'notify' and payload->>'doc' = 't' order by id`);
    expect(rows.map((r) => r.n)).toEqual([1, 3]);
  });

  it("a handler's debounced follow-ups to its own queue are not handed to the runner: one job stands, to start a period later", async () => {
    const child = defineJob({ name: "reindex-child", queue: "flow", schema: z.object({ n: z.number().int() }), handler: () => {} });
    const parent = defineJob({
      name: "edit", queue: "flow", schema: z.object({}),
      handler: async (_p, ctx) => {
        for (const n of [1, 2]) await ctx.enqueue(child, { n }, { debounce: { key: "from-handler", periodMs: 60_000 } });
      },
    });
    await enqueue(t, parent, {});
    const summary = await runWorker({ linger: "fixed", store: t, registry: createRegistry([parent, child]), queues: ["flow"], runnerId: "w", slots: 2, idleMs: 500, pollMs: 50 });
    expect(summary.claimed).toBe(1);
    const { rows } = await t.admin.query<{ n: number; status: string; later: boolean }>(
      `select (payload->>'n')::int as n, status::text, run_at > now() + interval '30 seconds' as later
       from "${t.schema}".jobs where name = 'reindex-child'`);
    expect(rows).toEqual([{ n: 2, status: "queued", later: true }]);
  });

  it("a batch with one key twice: debounce writes the last payload once, throttle keeps the first, and plain jobs go in beside them, results in order", async () => {
    const results = await enqueueJobs(t, [
      job(types.reindex, { doc: "b", n: 1 }, { debounce: { key: "batch", periodMs: 60_000 } }),
      job(types.notify, { doc: "b", n: 2 }, { throttle: { key: "batch", periodMs: 60_000 } }),
      job(types.reindex, { doc: "b", n: 3 }),
      job(types.reindex, { doc: "b", n: 4 }, { debounce: { key: "batch", periodMs: 60_000 } }),
      job(types.notify, { doc: "b", n: 5 }, { throttle: { key: "batch", periodMs: 60_000 } }),
    ]);
    expect(results.map((r) => [r.existing, r.debounced ?? r.throttled ?? false])).toEqual([
      [false, false], [false, false], [false, false], [true, true], [true, true],
    ]);
    expect(results[3]!.id).toBe(results[0]!.id);
    expect(results[4]!.id).toBe(results[1]!.id);
    expect((await read(results[0]!.id)).n).toBe(4);
    expect((await read(results[1]!.id)).n).toBe(2);
    expect((await read(results[2]!.id)).n).toBe(3);
  });

  it("a job type's debounce applies to every enqueue, keyed by its payload, and an enqueue's own throttle replaces it", async () => {
    const byDoc = defineJob({
      name: "by-doc", queue: "flow", schema: z.object({ doc: z.string(), n: z.number() }), handler: () => {},
      debounce: { key: (p) => (p.doc === "skip" ? null : `doc:${p.doc}`), periodMs: 60_000 },
    });
    const a = await enqueue(t, byDoc, { doc: "x", n: 1 });
    const b = await enqueue(t, byDoc, { doc: "x", n: 2 });
    const c = await enqueue(t, byDoc, { doc: "y", n: 3 });
    const skipped = [await enqueue(t, byDoc, { doc: "skip", n: 4 }), await enqueue(t, byDoc, { doc: "skip", n: 5 })];
    expect(b).toEqual({ id: a.id, existing: true, debounced: true });
    expect(c.existing).toBe(false);
    expect(skipped.map((s) => s.existing)).toEqual([false, false]);
    const t1 = await enqueue(t, byDoc, { doc: "x", n: 6 }, { throttle: { key: "x", periodMs: 60_000 } });
    expect(t1.existing).toBe(false);
    expect(t1.id).not.toBe(a.id);
  });

  it("refuses what has no meaning, naming the field, and writes nothing", async () => {
    const count = async () => Number((await t.admin.query<{ n: string }>(`select count(*) as n from "${t.schema}".jobs`)).rows[0]!.n);
    const before = await count();
    const debounce = { key: "k", periodMs: 1_000 };
    const refusals: [object, RegExp][] = [
      [{ debounce, dedupeKey: "k" }, /dedupeKey: a debounced job cannot also have a dedupe key/],
      [{ throttle: debounce, dedupeKey: "k" }, /dedupeKey: a throttled job cannot also have a dedupe key/],
      [{ debounce, throttle: debounce }, /throttle: give debounce or throttle, not both/],
      [{ debounce, delayMs: 5 }, /delayMs: a debounced job starts periodMs after its last enqueue/],
      [{ debounce: { ...debounce, maxWaitMs: 500 } }, /debounce\.maxWaitMs: must be at least periodMs/],
      [{ debounce: { key: "", periodMs: 1_000 } }, /debounce\.key/],
      [{ throttle: { key: "k", periodMs: 0 } }, /throttle\.periodMs/],
      [{ throttle: { key: "k", periodMs: 1_000, every: 2 } }, /throttle: Unrecognized key/i],
    ];
    for (const [options, message] of refusals) {
      await expect(enqueue(t, types.reindex, { doc: "z", n: 0 }, options)).rejects.toThrow(message);
    }
    expect(() => defineJob({ name: "both", schema: z.object({}), handler: () => {}, debounce, throttle: debounce }))
      .toThrow(/throttle: give debounce or throttle, not both/);
    expect(() => defineJob({ name: "short", schema: z.object({}), handler: () => {}, debounce: { ...debounce, maxWaitMs: 10 } }))
      .toThrow(/debounce\.maxWaitMs: must be at least periodMs/);
    expect(() => defineJob({ name: "typo", schema: z.object({}), handler: () => {}, debounce: { ...debounce, maxWait: 10 } as never }))
      .toThrow(/debounce\.maxWait: unknown option "maxWait"; known: key, periodMs, maxWaitMs/);
    expect(await count()).toBe(before);
  });
});

describe("debounce and throttle against a model, for random sequences of enqueues, claims, failures and windows ending", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 4);
  });
  afterAll(() => t.drop());

  type Op =
    | { op: "debounce" | "throttle"; key: number; n: number }
    | { op: "claim" | "fail" | "windowsEnd" };
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    { arbitrary: fc.record({ op: fc.constant("debounce" as const), key: fc.integer({ min: 0, max: 2 }), n: fc.integer({ min: 0, max: 1_000 }) }), weight: 4 },
    { arbitrary: fc.record({ op: fc.constant("throttle" as const), key: fc.integer({ min: 0, max: 2 }), n: fc.integer({ min: 0, max: 1_000 }) }), weight: 2 },
    { arbitrary: fc.record({ op: fc.constantFrom("claim" as const, "fail" as const) }), weight: 3 },
    { arbitrary: fc.record({ op: fc.constant("windowsEnd" as const) }), weight: 1 },
  );

  it("the job each enqueue returns, and the jobs that stand, are the model's", async () => {
    const types = jobTypes([]);
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 14 }), async (ops) => {
        const queue = `prop${run++}`;
        const key = (k: number) => `${queue}-k${k}`;
        /** Per debounce key: the unclaimed job and its payload's n. Per throttle key: the standing job, and every job made. */
        const debounced = new Map<number, { id: string; n: number }>();
        const windows = new Map<number, string>();
        const throttledJobs = new Map<number, number>();
        let held: { id: string; leaseToken: string }[] = [];
        for (const o of ops) {
          if (o.op === "debounce") {
            const r = await enqueue(t, types.reindex, { doc: queue, n: o.n }, { queue, debounce: { key: key(o.key), periodMs: 600_000 } });
            const before = debounced.get(o.key);
            expect(r).toEqual(before ? { id: before.id, existing: true, debounced: true } : { id: r.id, existing: false });
            debounced.set(o.key, { id: r.id, n: o.n });
          } else if (o.op === "throttle") {
            const r = await enqueue(t, types.notify, { doc: queue, n: o.n }, { queue, throttle: { key: key(o.key), periodMs: 600_000 } });
            const standing = windows.get(o.key);
            expect(r).toEqual(standing ? { id: standing, existing: true, throttled: true } : { id: r.id, existing: false });
            if (!standing) throttledJobs.set(o.key, (throttledJobs.get(o.key) ?? 0) + 1);
            windows.set(o.key, r.id);
          } else if (o.op === "claim") {
            await t.admin.query(`update "${t.schema}".jobs set run_at = now() where queue = $1 and status = 'queued'`, [queue]);
            held = [...held, ...(await claimJobs(t, { queue, runnerId: "prop", limit: 100, maxLeaseMs: 600_000 }))];
            debounced.clear();
          } else if (o.op === "fail") {
            await failJobs(t, held.map((h) => ({ ...h, outcome: "failed" as const, error: "prop", retryDelayMs: 600_000 })));
            held = [];
          } else {
            await t.admin.query(`update "${t.schema}".throttle_windows set window_ends_at = now() - interval '1 millisecond' where key like $1`, [`${queue}-%`]);
            windows.clear();
          }
          const { rows } = await t.admin.query<{ id: string; name: string; key: string | null; n: number; unclaimed: boolean }>(
            `select id::text, name, debounce_key as key, (payload->>'n')::int as n, status = 'queued' and runs = 0 as unclaimed
             from "${t.schema}".jobs where queue = $1`, [queue]);
          for (const k of [0, 1, 2]) {
            const unclaimed = rows.filter((r) => r.key === key(k) && r.unclaimed).map((r) => ({ id: r.id, n: r.n }));
            expect(unclaimed).toEqual(debounced.has(k) ? [debounced.get(k)] : []);
            expect(rows.filter((r) => r.name === "notify" && r.n !== null).length).toBe([...throttledJobs.values()].reduce((a, b) => a + b, 0));
          }
        }
      }),
      { numRuns: 60 },
    );
  });
});

describe("pruning throttle windows", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 2);
  });
  afterAll(() => t.drop());

  it("deletes windows that have ended and those whose job it prunes, and keeps an open window of a job it keeps", async () => {
    const { notify } = jobTypes([]);
    const throttle = (key: string) => ({ throttle: { key, periodMs: 600_000 } });
    const ended = await enqueue(t, notify, { doc: "p", n: 1 }, throttle("ended"));
    const pruned = await enqueue(t, notify, { doc: "p", n: 2 }, throttle("pruned"));
    const open = await enqueue(t, notify, { doc: "p", n: 3 }, throttle("open"));
    await t.admin.query(`update "${t.schema}".throttle_windows set window_ends_at = now() - interval '1 second' where key = 'ended'`);
    await t.admin.query(`update "${t.schema}".jobs set status = 'succeeded', finished_at = now() - interval '30 days' where id = $1::bigint`, [pruned.id]);
    expect(await pruneJobs(t, 7 * 24 * 3600_000)).toBe(1);
    const { rows } = await t.admin.query<{ key: string }>(`select key from "${t.schema}".throttle_windows order by key`);
    expect(rows.map((r) => r.key)).toEqual(["open"]);
    // The next enqueue of a pruned job's key opens a new window; the open one still throttles.
    expect((await enqueue(t, notify, { doc: "p", n: 4 }, throttle("pruned"))).existing).toBe(false);
    expect((await enqueue(t, notify, { doc: "p", n: 5 }, throttle("ended"))).id).not.toBe(ended.id);
    expect(await enqueue(t, notify, { doc: "p", n: 6 }, throttle("open"))).toEqual({ id: open.id, existing: true, throttled: true });
  });
});
