import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { Linger } from "../shared/runner/linger.ts";
import { STREAM_POLLS } from "../shared/runner/loop.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { ManualClock } from "./support/clock.ts";
import { createTestDb, driveOnClock, watchedStore, type TestDb } from "./support/db.ts";

describe("the adaptive linger (pure policy, injected clock)", () => {
  const make = () => {
    const clock = new ManualClock();
    return { clock, linger: new Linger(clock, { minMs: 50, maxMs: 2_000 }) };
  };

  it("stays one poll after an isolated job, or before any work", async () => {
    const { linger } = make();
    expect(linger.ms()).toBe(50);
    linger.arrived();
    expect(linger.ms()).toBe(50);
  });

  it("stays `isolatedMs` after an isolated job when given (the deployed runners: 0), and a stream's pace all the same", async () => {
    const clock = new ManualClock();
    const linger = new Linger(clock, { minMs: 50, maxMs: 2_000, isolatedMs: 0 });
    linger.arrived();
    expect(linger.ms()).toBe(0);
    await clock.advance(300);
    linger.arrived();
    expect(linger.ms()).toBe(450);
  });

  it("stays a little longer than the longest recent gap of a stream", async () => {
    const { clock, linger } = make();
    for (const gap of [0, 300, 200, 400]) {
      await clock.advance(gap);
      linger.arrived();
    }
    expect(linger.ms()).toBe(600);
  });

  it("forgets gaps older than its window", async () => {
    const { clock, linger } = make();
    linger.arrived();
    await clock.advance(1_000);
    linger.arrived();
    expect(linger.ms()).toBe(1_500);
    for (let i = 0; i < 4; i++) {
      await clock.advance(100);
      linger.arrived();
    }
    expect(linger.ms()).toBe(150);
  });

  it("leaves after one poll when the stream is too sparse for its longest stay", async () => {
    const { clock, linger } = make();
    linger.arrived();
    await clock.advance(1_500);
    linger.arrived();
    // The next arrival is expected ~2.25 s away: lingering 2 s would pay for the stay and the wake-up both.
    expect(linger.ms()).toBe(50);
  });

  it("never stays less than one poll, nor longer than its maximum", async () => {
    const clock = new ManualClock();
    const linger = new Linger(clock, { minMs: 50, maxMs: 30 });
    expect(linger.ms()).toBe(30);
    const dense = new Linger(clock, { minMs: 50, maxMs: 2_000 });
    dense.arrived();
    await clock.advance(5);
    dense.arrived();
    expect(dense.ms()).toBe(50);
  });
});

describe("a runner's linger and what it leaves behind (pg)", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 4);
  });
  afterAll(() => t.drop());

  const quick = defineJob({ name: "linger.quick", schema: z.object({}), queue: "linger", leaseMs: 5_000, handler: () => {} });

  // The runners run on a ManualClock, moved to each runner's next timer whenever it rests (no query in flight).

  it("an isolated job's runner leaves after about one poll instead of its whole idle time", async () => {
    const clock = new ManualClock();
    const { store, atRest } = watchedStore(t);
    await enqueue(t, quick, {});
    const started = clock.now();
    const summary = await driveOnClock(clock, atRest, runWorker({
      store, clock, registry: createRegistry([quick]), queues: ["linger"], runnerId: "iso", slots: 4, idleMs: 2_000, pollMs: 50, linger: "adaptive",
    }));
    expect(summary.succeeded).toBe(1);
    expect(clock.now() - started).toBeLessThan(1_000);
    // The same with a fixed linger stays its idle time.
    await enqueue(t, quick, {});
    const fixedStart = clock.now();
    await driveOnClock(clock, atRest, runWorker({
      linger: "fixed", store, clock, registry: createRegistry([quick]), queues: ["linger"], runnerId: "fixed", slots: 4, idleMs: 2_000, pollMs: 50,
    }));
    expect(clock.now() - fixedStart).toBeGreaterThanOrEqual(2_000);
  });

  it("while a stream arrives, the next job is claimed a fifth of a poll later, not a whole poll, and not at once", async () => {
    const clock = new ManualClock();
    const { store, atRest } = watchedStore(t);
    let claims = 0;
    const counted = { ...store, db: { ...store.db, query: ((text: string, values?: unknown[]) => {
      if (/set status = 'running'/.test(text)) claims++;
      return store.db.query(text, values);
    }) as typeof store.db.query } };
    let started = 0;
    const streamed = defineJob({ name: "linger.stream", schema: z.object({}), queue: "stream", leaseMs: 5_000, handler: () => void started++ });
    await enqueue(t, streamed, {});
    const running = runWorker({
      store: counted, clock, registry: createRegistry([streamed]), queues: ["stream"], runnerId: "stream", slots: 4, prefetch: 0,
      linger: "fixed", idleMs: 1_000, pollMs: 50,
    });
    for (let n = 1; n <= 3; n++) {
      await atRest();
      expect(started).toBe(n);
      // The claim that found job n came up short (1 of 4): the next comes a fifth of a poll
      // later (its earliest timer), and none went out meanwhile.
      expect(claims).toBe(n);
      expect(clock.dueIn()).toBe(50 / STREAM_POLLS);
      await enqueue(t, streamed, {});
      await clock.advance(50 / STREAM_POLLS);
    }
    await atRest();
    expect(started).toBe(4);
    expect((await driveOnClock(clock, atRest, running)).succeeded).toBe(4);
  });

  it("a steady stream keeps a runner whose environment has seen it, which leaves soon after the stream stops", async () => {
    const queued = async () =>
      (await t.admin.query(`select 1 from "${t.schema}".jobs where queue = 'linger' and status = 'queued'`)).rowCount! > 0;
    /**
     * One job every 250 ms on `clock`; a runner (on `clock`) is invoked whenever a job waits and none
     * runs (a wake-up); returns the invocations. Whenever the runner rests, the clock moves to the
     * next arrival or the runner's next timer, whichever is first.
     */
    const stream = async (clock: ManualClock, linger: () => Linger | "adaptive") => {
      const GAP_MS = 250;
      const JOBS = 8;
      const { store, atRest } = watchedStore(t);
      const begun = clock.now();
      let fed = 0;
      let runner: Promise<void> | null = null;
      let failure: unknown = null;
      let invocations = 0;
      let succeeded = 0;
      let lastExit = 0;
      for (;;) {
        await atRest();
        if (failure) throw failure;
        if (fed < JOBS && clock.now() >= begun + fed * GAP_MS) {
          await enqueue(t, quick, {});
          fed++;
          continue;
        }
        if (!runner && (await queued())) {
          invocations++;
          runner = runWorker({
            store, clock, registry: createRegistry([quick]), queues: ["linger"], runnerId: `stream-${invocations}`, slots: 4,
            idleMs: 2_000, pollMs: 20, linger: linger(),
          }).then(
            (summary) => {
              succeeded += summary.succeeded;
              lastExit = clock.now();
              runner = null;
            },
            (err: unknown) => void (failure = err),
          );
          continue;
        }
        if (!runner && fed === JOBS) break;
        const step = Math.min(fed < JOBS ? begun + fed * GAP_MS - clock.now() : Infinity, clock.dueIn() ?? Infinity);
        if (step === Infinity) throw new Error("a runner neither queries nor waits on its clock");
        await clock.advance(step);
      }
      // The feed stops a gap after its last job.
      const stopAt = begun + JOBS * GAP_MS;
      return { invocations, succeeded, lingeredAfterStop: lastExit - stopAt };
    };
    const fresh = await stream(new ManualClock(), () => "adaptive");
    const clock = new ManualClock();
    const shared = new Linger(clock, { minMs: 20, maxMs: 2_000 });
    const remembered = await stream(clock, () => shared);
    expect(fresh.succeeded).toBe(8);
    expect(remembered.succeeded).toBe(8);
    // Alone, each runner sees one arrival and leaves: one invocation per job.
    expect(fresh.invocations).toBeGreaterThanOrEqual(6);
    // Remembering the arrivals, the second runner learns the pace and stays for the rest.
    expect(remembered.invocations).toBeLessThanOrEqual(3);
    // ~1.5 gaps after the last job, not its 2 s idle time.
    expect(remembered.lingeredAfterStop).toBeLessThan(1_000);
  });

  it("counts the jobs it put back in the queue and did not run again: a retry due later", async () => {
    const later = defineJob({
      name: "linger.later", schema: z.object({}), queue: "linger-retry", leaseMs: 5_000, backoffMs: 20_000,
      handler: () => {
        throw new Error("fails");
      },
    });
    const soon = defineJob({
      name: "linger.soon", schema: z.object({}), queue: "linger-retry", leaseMs: 5_000, backoffMs: 0,
      handler: (_p, ctx) => {
        if (ctx.attempt === 1) throw new Error("fails once");
      },
    });
    await enqueue(t, later, {});
    await enqueue(t, soon, {});
    const clock = new ManualClock();
    const { store, atRest } = watchedStore(t);
    const summary = await driveOnClock(clock, atRest, runWorker({
      linger: "fixed", clock,
      store, registry: createRegistry([later, soon]), queues: ["linger-retry"], runnerId: "left", slots: 4, idleMs: 300, pollMs: 20,
    }));
    // `soon` was retried and succeeded here; `later` waits 10-20 s with no runner.
    expect(summary).toMatchObject({ failed: 2, succeeded: 1, leftQueued: 1 });
  });
});
