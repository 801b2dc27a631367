import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { systemClock } from "../shared/runner/clock.ts";
import { Linger } from "../shared/runner/linger.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { ManualClock } from "./support/clock.ts";
import { createTestDb, type TestDb } from "./support/db.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

  it("an isolated job's runner leaves after about one poll instead of its whole idle time", async () => {
    await enqueue(t, quick, {});
    const started = Date.now();
    const summary = await runWorker({
      store: t, registry: createRegistry([quick]), queues: ["linger"], runnerId: "iso", slots: 4, idleMs: 2_000, pollMs: 50, linger: "adaptive",
    });
    expect(summary.succeeded).toBe(1);
    expect(Date.now() - started).toBeLessThan(1_000);
    // The same with a fixed linger stays its idle time.
    await enqueue(t, quick, {});
    const fixedStart = Date.now();
    await runWorker({ linger: "fixed", store: t, registry: createRegistry([quick]), queues: ["linger"], runnerId: "fixed", slots: 4, idleMs: 2_000, pollMs: 50 });
    expect(Date.now() - fixedStart).toBeGreaterThanOrEqual(2_000);
  });

  it("a steady stream keeps a runner whose environment has seen it, which leaves soon after the stream stops", async () => {
    const queued = async () =>
      (await t.admin.query(`select 1 from "${t.schema}".jobs where queue = 'linger' and status = 'queued'`)).rowCount! > 0;
    /** One job every 250 ms; a runner is invoked whenever a job waits and none runs (a wake-up); returns the invocations. */
    const stream = async (linger: () => Linger | "adaptive") => {
      let feeding = true;
      let stopAt = 0;
      const feed = (async () => {
        for (let i = 0; i < 8; i++) {
          await enqueue(t, quick, {});
          await sleep(250);
        }
        stopAt = Date.now();
        feeding = false;
      })();
      let invocations = 0;
      let succeeded = 0;
      let lastExit = 0;
      while (feeding || (await queued())) {
        if (!(await queued())) {
          await sleep(10);
          continue;
        }
        invocations++;
        const summary = await runWorker({
          store: t, registry: createRegistry([quick]), queues: ["linger"], runnerId: `stream-${invocations}`, slots: 4,
          idleMs: 2_000, pollMs: 20, linger: linger(),
        });
        succeeded += summary.succeeded;
        lastExit = Date.now();
      }
      await feed;
      return { invocations, succeeded, lingeredAfterStop: lastExit - stopAt };
    };
    const fresh = await stream(() => "adaptive");
    const shared = new Linger(systemClock, { minMs: 20, maxMs: 2_000 });
    const remembered = await stream(() => shared);
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
    const summary = await runWorker({
      linger: "fixed",
      store: t, registry: createRegistry([later, soon]), queues: ["linger-retry"], runnerId: "left", slots: 4, idleMs: 300, pollMs: 20,
    });
    // `soon` was retried and succeeded here; `later` waits 10-20 s with no runner.
    expect(summary).toMatchObject({ failed: 2, succeeded: 1, leftQueued: 1 });
  });
});
