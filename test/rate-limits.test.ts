import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { claimJobs, type ClaimArgs } from "../shared/lifecycle/claim.ts";
import { sql } from "../shared/db/db.ts";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { ValidationError } from "../shared/errors.ts";
import { defineJob } from "../shared/jobs/job.ts";
import { completeJobs } from "../shared/lifecycle/settle.ts";
import { createRegistry } from "../shared/jobs/job.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { nextDue } from "../shared/scheduler/due.ts";
import { schedulePass } from "../functions/scheduler.ts";
import config from "../leasehold.config.ts";
import { claimable } from "../shared/settings/serving.ts";
import { countReady, pruneJobs } from "../shared/observe/stats.ts";
import { ManualClock } from "./support/clock.ts";
import { createTestDb, driveOnClock, drivers, passRateWindows, watchedStore, type TestDb } from "./support/db.ts";

const payload = z.object({ key: z.string(), n: z.number().int() });
const limitedType = (name: string, limit: number, periodMs: number) =>
  defineJob({ name, schema: payload, handler: () => {}, leaseMs: 60_000, rateLimit: { limit, periodMs, key: (p) => p.key } });
const plain = defineJob({ name: "rate-plain", schema: payload, handler: () => {} });

/** Every window of `periodMs` holds at most `limit` of `times` (sorted ms). */
function worstWindow(times: number[], periodMs: number): number {
  let worst = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i]! - times[j]! >= periodMs) j++;
    worst = Math.max(worst, i - j + 1);
  }
  return worst;
}

describe.each(drivers)("rate limits in the claim (%s driver)", (driver) => {
  let t: TestDb;
  let queueNo = 0;
  const freshQueue = () => `rl${queueNo++}`;
  beforeAll(async () => {
    t = await createTestDb(driver, 6);
  });
  afterAll(() => t.drop());

  const claim = (queue: string, extra: Partial<ClaimArgs> = {}) =>
    claimJobs(t, { queue, runnerId: "r", limit: 20, maxLeaseMs: 60_000, rated: true, limited: true, ...extra });

  it("starts at most `limit` of a key per period, charges nothing to the jobs it holds back, and does not hold back other keys", async () => {
    const type = limitedType("rate-three", 3, 1_500);
    const queue = freshQueue();
    await enqueueJobs(t, Array.from({ length: 8 }, (_, n) => job(type, { key: "k", n }, { queue })));
    await enqueueJobs(t, Array.from({ length: 4 }, (_, n) => job(plain, { key: "x", n }, { queue })));
    const first = await claim(queue);
    expect(first.filter((j) => j.name === "rate-three")).toHaveLength(3);
    expect(first.filter((j) => j.name === "rate-plain")).toHaveLength(4);
    expect(first.every((j) => Boolean(j.rated) === (j.name === "rate-three"))).toBe(true);
    await completeJobs(t, first);
    expect(await claim(queue)).toEqual([]);
    const { rows } = await t.db.query<{ attempts: number; n: number }>(
      sql(t.schema, "select attempts, count(*)::integer as n from leasehold.jobs where queue = $1 and status = 'queued' group by 1"), [queue],
    );
    expect(rows).toEqual([{ attempts: 0, n: 5 }]);
    // The period passes, in the database: the window's starts move back.
    expect(await passRateWindows(t, 1_600, "key = 'k'")).toBe(1);
    expect(await claim(queue)).toHaveLength(3);
  });

  it("claims no more rate-limited jobs than the runner can start now (rateRoom), and other jobs up to the limit", async () => {
    const type = limitedType("rate-room", 10, 60_000);
    const queue = freshQueue();
    await enqueueJobs(t, Array.from({ length: 5 }, (_, n) => job(type, { key: "k", n }, { queue })));
    await enqueueJobs(t, Array.from({ length: 5 }, (_, n) => job(plain, { key: "x", n }, { queue })));
    const got = await claim(queue, { rateRoom: 1 });
    expect(got.filter((j) => j.rated)).toHaveLength(1);
    expect(got.filter((j) => !j.rated)).toHaveLength(5);
  });

  it("shares a key's window between job types, each held to its own limit", async () => {
    const a = limitedType("rate-share-a", 2, 60_000);
    const b = limitedType("rate-share-b", 3, 60_000);
    const queue = freshQueue();
    await enqueueJobs(t, [0, 1].map((n) => job(a, { key: "shared", n }, { queue })));
    expect(await claim(queue)).toHaveLength(2);
    await enqueueJobs(t, [0, 1, 2].map((n) => job(b, { key: "shared", n }, { queue })));
    // Two starts already in the window: b's limit of 3 leaves one.
    expect(await claim(queue)).toHaveLength(1);
    await enqueueJobs(t, [2].map((n) => job(a, { key: "shared", n }, { queue })));
    expect((await claim(queue)).map((j) => j.name)).toEqual([]);
  });

  it("tells the scheduler no runner is wanted while a key's window is full, and when it opens; pruning drops a window only once it is empty", async () => {
    const type = limitedType("rate-due", 2, 2_000);
    const queue = freshQueue();
    const can = { names: ["rate-due"], maxLeaseMs: new Map([[queue, 60_000]]) };
    await enqueueJobs(t, Array.from({ length: 5 }, (_, n) => job(type, { key: "due", n }, { queue })));
    expect(await countReady(t, can, 100)).toBe(5);
    const claimed = await claim(queue);
    expect(claimed).toHaveLength(2);
    const { rows: [w] } = await t.db.query<{ first_ms: number }>(
      sql(t.schema, "select (extract(epoch from starts[1]) * 1000)::float8 as first_ms from leasehold.rate_windows where key = 'due'"),
    );
    expect(await countReady(t, can, 100)).toBe(0);
    const due = await nextDue(t, can);
    expect(due.runAt).toBeNull();
    expect(due.laterAt!.getTime()).toBeCloseTo(w!.first_ms + 2_000, -1);
    await pruneJobs(t, 60_000);
    expect((await t.db.query(sql(t.schema, "select 1 from leasehold.rate_windows where key = 'due'"))).rows).toHaveLength(1);
    await passRateWindows(t, 2_100, "key = 'due'");
    expect(await countReady(t, can, 100)).toBe(3);
    expect((await nextDue(t, can)).runAt).not.toBeNull();
    await pruneJobs(t, 60_000);
    expect((await t.db.query(sql(t.schema, "select 1 from leasehold.rate_windows where key = 'due'"))).rows).toHaveLength(0);
    expect(await claim(queue)).toHaveLength(2);
  });

  it("holds the limit for generated limits, periods, keys, concurrent claimers and arrivals, and every job ends", async () => {
    const shape = fc.record({
      limit: fc.integer({ min: 1, max: 4 }),
      periodMs: fc.integer({ min: 150, max: 400 }),
      keys: fc.integer({ min: 1, max: 3 }),
      claimers: fc.integer({ min: 1, max: 4 }),
      perKey: fc.integer({ min: 1, max: 8 }),
      arrivals: fc.array(fc.integer({ min: 0, max: 300 }), { minLength: 1, maxLength: 3 }),
      claimSize: fc.integer({ min: 1, max: 6 }),
      tickMs: fc.integer({ min: 20, max: 120 }),
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(shape, async (s) => {
        const type = limitedType(`rate-prop-${run++}`, s.limit, s.periodMs);
        const queue = freshQueue();
        const total = s.keys * s.perKey;
        const specs = Array.from({ length: total }, (_, n) => job(type, { key: `k${n % s.keys}`, n }, { queue }));
        // Arrivals in waves, at generated offsets. Time passes in ticks, in the database (the keys'
        // window starts and their jobs' started_at move back a tick); within a tick the claimers claim
        // at once, beside that tick's arrivals, until none finds more.
        const waves = s.arrivals.map((at, w) => ({ at, specs: specs.filter((_, i) => i % s.arrivals.length === w) }));
        let done = 0;
        for (let elapsed = 0; done < total && elapsed < 60_000; elapsed += s.tickMs) {
          if (elapsed > 0) await passRateWindows(t, s.tickMs, `key in (select rate_key from "${t.schema}".jobs where queue = $1)`, [queue]);
          const arriving = waves.filter((w) => w.at <= elapsed && w.at > elapsed - s.tickMs && w.specs.length > 0);
          const claimers = Array.from({ length: s.claimers }, async (_, c) => {
            for (let more = true; more && done < total; ) {
              const got = await claimJobs(t, { queue, runnerId: `c${c}`, limit: s.claimSize, maxLeaseMs: 60_000, rated: true, limited: true });
              if (got.length > 0) await completeJobs(t, got);
              done += got.length;
              more = got.length > 0;
            }
          });
          await Promise.all([...arriving.map((w) => enqueueJobs(t, w.specs)), ...claimers]);
        }
        expect(done).toBe(total);
        const { rows } = await t.db.query<{ key: string; started: string }>(
          sql(t.schema, `select payload->>'key' as key, (extract(epoch from started_at) * 1000)::float8::text as started
                         from leasehold.jobs where queue = $1 and status = 'succeeded'`), [queue],
        );
        expect(rows).toHaveLength(total);
        for (let k = 0; k < s.keys; k++) {
          const times = rows.filter((r) => r.key === `k${k}`).map((r) => Number(r.started)).sort((a, b) => a - b);
          expect(worstWindow(times, s.periodMs)).toBeLessThanOrEqual(s.limit);
        }
      }),
      { numRuns: driver === "pg" ? 12 : 4 },
    );
  });
});

describe("rate limit options", () => {
  it("refuses a rate limit out of bounds or an option it does not know, naming the field", () => {
    const refused = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        expect(err).toBeInstanceOf(ValidationError);
        return (err as ValidationError).issues.map((i) => i.path.join("."));
      }
      throw new Error("not refused");
    };
    expect(refused(() => defineJob({ name: "r1", schema: payload, handler: () => {}, rateLimit: { limit: 0, periodMs: 1_000 } }))).toEqual(["rateLimit.limit"]);
    expect(refused(() => defineJob({ name: "r2", schema: payload, handler: () => {}, rateLimit: { limit: 1, periodMs: 1.5 } }))).toEqual(["rateLimit.periodMs"]);
    expect(refused(() => defineJob({ name: "r3", schema: payload, handler: () => {}, rateLimit: { limit: 1, periodMs: 10, burst: 2 } as never }))).toEqual(["rateLimit.burst"]);
  });

  it("lets an enqueue replace its type's key, and refuses one for a type without a rate limit", async () => {
    const t = await createTestDb("pg", 2);
    try {
      const type = limitedType("rate-own", 1, 60_000);
      const queue = "rate-own";
      await enqueue(t, type, { key: "from-payload", n: 0 }, { queue, rateLimit: { key: "own", limit: 2 } });
      const { rows } = await t.db.query(sql(t.schema, "select rate_key, rate_limit, rate_period_ms from leasehold.jobs where queue = $1"), [queue]);
      expect(rows).toEqual([{ rate_key: "own", rate_limit: 2, rate_period_ms: 60_000 }]);
      const err = await enqueue(t, plain, { key: "x", n: 0 }, { queue, rateLimit: { key: "own" } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).issues[0]!.path).toEqual(["rateLimit"]);
      expect((await t.db.query(sql(t.schema, "select 1 from leasehold.jobs where name = 'rate-plain'"))).rows).toEqual([]);
    } finally {
      await t.drop();
    }
  });
});

describe("rate limits in the runner (pg driver)", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 6);
  });
  afterAll(() => t.drop());

  it("starts 1,000 ready jobs of one key at its limit of 10 per second, claiming as each window opens, while another key's jobs run at full speed", async () => {
    // The runner runs on a ManualClock; each time it waits, the clock moves to its next timer and the
    // key's window starts (and its jobs' started_at) move back as far in the database.
    const clock = new ManualClock();
    const starts: number[] = [];
    const otherEnds: number[] = [];
    const queue = "rated-runner";
    const api = defineJob({
      name: "call-api", schema: z.object({ n: z.number().int() }), queue, leaseMs: 1_000, handler: () => void starts.push(clock.now()),
      rateLimit: { limit: 10, periodMs: 1_000, key: "api" },
    });
    const other = defineJob({
      name: "local-work", schema: z.object({ n: z.number().int() }), queue, leaseMs: 1_000,
      handler: async () => {
        await new Promise((r) => clock.after(5, () => r(undefined)));
        otherEnds.push(clock.now());
      },
    });
    await enqueueJobs(t, Array.from({ length: 1_000 }, (_, n) => job(api, { n })));
    await enqueueJobs(t, Array.from({ length: 200 }, (_, n) => job(other, { n })));
    const watched = watchedStore(t);
    const begun = clock.now();
    const summary = await driveOnClock(clock, watched.atRest, runWorker({
      store: watched.store, registry: createRegistry([api, other]), queues: [queue], runnerId: "rated", slots: 10, idleMs: 500, clock,
      remainingMs: () => 5_600 - (clock.now() - begun),
    }), (ms) => passRateWindows(t, ms, "key = 'api'"));
    // Ten at each window's opening: 41 starts in 4 windows and a bit.
    expect(starts.length).toBeGreaterThanOrEqual(41);
    // Claimed as each window opened, on the runner's clock. (The database's clock runs on while the
    // runner works and the ManualClock does not, so a window opens on the runner's clock up to that
    // work's time early: the clock bounds how late the claims come, the stored starts how many.)
    const rate = 40 / ((starts[40]! - starts[0]!) / 1_000);
    expect(rate).toBeGreaterThan(9);
    // Never more than 10 in a second, in the starts the claims recorded.
    const { rows: started } = await t.db.query<{ ms: string }>(
      sql(t.schema, "select (extract(epoch from started_at) * 1000)::float8::text as ms from leasehold.jobs where name = 'call-api' and started_at is not null"),
    );
    expect(started.length).toBeGreaterThanOrEqual(starts.length);
    expect(worstWindow(started.map((r) => Number(r.ms)).sort((a, b) => a - b), 1_000)).toBe(10);
    // The other key's 200 jobs were not held back behind the limited ones.
    expect(otherEnds).toHaveLength(200);
    expect(Math.max(...otherEnds)).toBeLessThan(starts[10]!);
    // Nothing held back was charged.
    const { rows } = await t.db.query<{ attempts: number; n: number }>(
      sql(t.schema, "select attempts, count(*)::integer as n from leasehold.jobs where queue = $1 and status = 'queued' group by 1"), [queue],
    );
    expect(rows).toEqual([{ attempts: 0, n: 1_200 - summary.succeeded }]);
  });
});

describe("rate limits and the scheduler (pg driver)", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 4);
  });
  afterAll(() => t.drop());

  it("starts no runner over a minute of passes while the only due jobs wait on a full window, and plans to wake at its opening", async () => {
    const partner = defineJob({ name: "partner.sync", schema: z.object({ n: z.number().int() }), handler: () => {}, rateLimit: { limit: 1, periodMs: 60_000 } });
    const registry = createRegistry([partner]);
    await enqueueJobs(t, [0, 1, 2].map((n) => job(partner, { n })));
    const invoked: string[] = [];
    const invoke = async (runner: string) => void invoked.push(runner);
    // Before any start, the jobs are demand: a runner is started.
    expect(await schedulePass({ config, registry }, t.pool, t.schema, invoke)).toMatchObject({ ready: 3, invoked: 1 });
    // That runner starts one job, and the window is full for a minute.
    const started = await claimJobs(t, { queue: partner.queue, runnerId: "r", limit: 3, maxLeaseMs: 60_000, rated: true });
    expect(started).toHaveLength(1);
    await completeJobs(t, started);
    invoked.length = 0;
    const passes = Math.ceil(60_000 / config.scheduler.pollMs);
    for (let pass = 0; pass < passes; pass++) {
      expect(await schedulePass({ config, registry }, t.pool, t.schema, invoke)).toEqual({ ready: 0, invoked: 0, covered: false });
    }
    expect(invoked).toEqual([]);
    const due = await nextDue(t, claimable(config, registry.keys()));
    const { rows: [w] } = await t.db.query<{ first_ms: number }>(
      sql(t.schema, "select (extract(epoch from starts[1]) * 1000)::float8 as first_ms from leasehold.rate_windows where key = 'partner.sync'"),
    );
    expect(due.laterAt!.getTime()).toBeCloseTo(w!.first_ms + 60_000, -1);
  });
});
