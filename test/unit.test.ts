import { describe, expect, it } from "vitest";
import * as z from "zod";
import { retryDelayMs } from "../shared/lifecycle/backoff.ts";
import { MAX_BACKOFF_MS } from "../shared/settings/config.ts";
import { sql } from "../shared/db/db.ts";
import { jsonArray, numberArray, textArray } from "../shared/db/arrays.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { decideRescue } from "../shared/lifecycle/rescue.ts";
import { countEndings, deathSummary } from "../dev/output.ts";

describe("retry backoff", () => {
  it("doubles per attempt between half and all of the exponential delay", () => {
    expect(retryDelayMs(1, 1_000, () => 0)).toBe(500);
    expect(retryDelayMs(1, 1_000, () => 1)).toBe(1_000);
    expect(retryDelayMs(3, 1_000, () => 0)).toBe(2_000);
    expect(retryDelayMs(3, 1_000, () => 1)).toBe(4_000);
  });
  it("is capped", () => {
    expect(retryDelayMs(60, 1_000, () => 1)).toBe(MAX_BACKOFF_MS);
  });
});

describe("rescue decisions", () => {
  const lease = { id: "1", backoffMs: 100, handlerStarted: true, owesAttempt: false };
  it("retries while attempts are left, with backoff, and isolates a job about to make its last attempt", () => {
    expect(decideRescue({ ...lease, attempts: 1, maxAttempts: 3 }, () => 1)).toEqual({ action: "retry", attempts: 1, delayMs: 100, suspect: false });
    expect(decideRescue({ ...lease, attempts: 2, maxAttempts: 3 }, () => 1)).toEqual({ action: "retry", attempts: 2, delayMs: 200, suspect: true });
  });
  it("marks dead when the last attempt expired", () => {
    expect(decideRescue({ ...lease, attempts: 3, maxAttempts: 3 })).toEqual({ action: "dead", attempts: 3 });
  });
  it("gives the attempt back to a job whose handler never started", () => {
    expect(decideRescue({ ...lease, handlerStarted: false, attempts: 3, maxAttempts: 3 })).toEqual({ action: "refund", attempts: 2 });
  });
  it("charges an owed attempt with the next death, never beyond the maximum", () => {
    expect(decideRescue({ ...lease, owesAttempt: true, attempts: 1, maxAttempts: 3 }, () => 1)).toMatchObject({ action: "retry", attempts: 2 });
    expect(decideRescue({ ...lease, owesAttempt: true, attempts: 2, maxAttempts: 3 })).toEqual({ action: "dead", attempts: 3 });
    expect(decideRescue({ ...lease, owesAttempt: true, attempts: 3, maxAttempts: 3 })).toEqual({ action: "dead", attempts: 3 });
  });
});

describe("schema names in SQL", () => {
  it("replaces only the schema prefix", () => {
    expect(sql("tenant_a", "select * from leasehold.jobs where name = 'leasehold'")).toBe(
      `select * from "tenant_a".jobs where name = 'leasehold'`,
    );
  });
  it("rejects anything but a plain identifier", () => {
    expect(() => sql('a"b', "select 1")).toThrow(/invalid schema name/);
    expect(() => sql("A", "select 1")).toThrow(/invalid schema name/);
  });
});

describe("job definitions", () => {
  it("fills defaults and rejects a bad name", () => {
    const j = defineJob({ name: "a.b", schema: z.object({}), handler: () => {} });
    expect(j).toMatchObject({ queue: "default", maxAttempts: 3, leaseMs: 30_000, priority: 0 });
    expect(() => defineJob({ name: "has space", schema: z.object({}), handler: () => {} })).toThrow(/invalid job name/);
  });
  it("refuses two types with one name", () => {
    const j = defineJob({ name: "dup", schema: z.object({}), handler: () => {} });
    expect(() => createRegistry([j, j])).toThrow(/defined twice/);
  });
});

import { createWaker } from "../shared/scheduler/wake.ts";
import { ManualClock } from "./support/clock.ts";

describe("the enqueue waker", () => {
  it("coalesces a burst of wake-ups into at most two sends, the second no sooner than minIntervalMs after the first", async () => {
    const clock = new ManualClock();
    let sends = 0;
    let answer = () => {};
    // Each send is in flight until the test answers it.
    const waker = createWaker(() => (sends++, new Promise<void>((r) => (answer = r))), { minIntervalMs: 10, clock });
    for (let i = 0; i < 100; i++) waker.wake();
    await clock.advance(0);
    expect(sends).toBe(1); // the burst arrived while the first send was in flight
    answer();
    await clock.advance(9);
    expect(sends).toBe(1);
    await clock.advance(1);
    expect(sends).toBe(2);
    answer();
    await waker.settled();
    expect(sends).toBe(2);
    waker.wake();
    await clock.advance(10);
    answer();
    await waker.settled();
    expect(sends).toBe(3);
  });
  it("reports a failed send and keeps working", async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const waker = createWaker(async () => {
      if (calls++ === 0) throw new Error("throttled");
    }, { minIntervalMs: 0, onError: (e) => errors.push(e) });
    waker.wake();
    await waker.settled();
    waker.wake();
    await waker.settled();
    expect(calls).toBe(2);
    expect(errors).toHaveLength(1);
  });
});

import { runnersToStart } from "../shared/scheduler/fleet.ts";

describe("the scheduler's fan-out", () => {
  const base = { slots: 20, maxConcurrency: 10, budget: 100 };
  it("starts nothing for an empty queue", () => {
    expect(runnersToStart({ ...base, ready: 0, live: 0 })).toBe(0);
  });
  it("starts one runner per slots' worth of ready jobs", () => {
    expect(runnersToStart({ ...base, ready: 1, live: 0 })).toBe(1);
    expect(runnersToStart({ ...base, ready: 41, live: 0 })).toBe(3);
  });
  it("spawns nothing for work live runners are already draining", () => {
    expect(runnersToStart({ ...base, ready: 40, live: 2 })).toBe(0);
    expect(runnersToStart({ ...base, ready: 45, live: 2 })).toBe(1);
  });
  it("never exceeds the maximum concurrency or the connection budget", () => {
    expect(runnersToStart({ ...base, ready: 10_000, live: 0 })).toBe(10);
    expect(runnersToStart({ ...base, ready: 10_000, live: 7 })).toBe(3);
    expect(runnersToStart({ ...base, ready: 10_000, live: 12 })).toBe(0);
    expect(runnersToStart({ ...base, ready: 10_000, live: 0, budget: 4 })).toBe(4);
  });
});

import { MAX_PREFETCH, PREFETCH_HOLD_MS, PrefetchGauge } from "../shared/runner/prefetch.ts";

describe("the prefetch gauge", () => {
  it("claims nothing ahead before a job has been timed", () => {
    const g = new PrefetchGauge(20);
    g.claimTook(2);
    expect(g.size()).toBe(0);
  });
  it("claims ahead what the slots could finish during two claim round trips, on a slow link", () => {
    const g = new PrefetchGauge(10);
    g.claimTook(40);
    g.jobTook(2); // 10 slots, 2 ms a job: 5 jobs per ms
    expect(g.size()).toBe(2 * 5 * 40);
  });
  it("holds at least what the slots finish in PREFETCH_HOLD_MS, however quick the claim", () => {
    // 10 slots of 5 ms jobs behind a 1 ms claim: two round trips would be 4
    // jobs, claimed a few at a time as slots free; the hold claims 100.
    const g = new PrefetchGauge(10);
    g.claimTook(1);
    g.jobTook(5);
    expect(g.size()).toBe((10 * PREFETCH_HOLD_MS) / 5);
    // Jobs of 200 ms in 20 slots: what 50 ms frees, 5; of 2 s, none.
    const slow = new PrefetchGauge(20);
    slow.claimTook(1);
    slow.jobTook(200);
    expect(slow.size()).toBe(5);
    slow.jobTook(2_000);
    for (let i = 0; i < 30; i++) slow.jobTook(2_000);
    expect(slow.size()).toBe(0);
  });
  it("claims nothing ahead for jobs slower than the slots' share of the hold, and never more than the cap", () => {
    const slow = new PrefetchGauge(2);
    slow.claimTook(1);
    slow.jobTook(150);
    expect(slow.size()).toBe(0);
    const quick = new PrefetchGauge(20);
    quick.claimTook(5);
    quick.jobTook(0);
    expect(quick.size()).toBe(MAX_PREFETCH);
  });
});

describe("the dev stack's death line", () => {
  it("counts how the runs ended, from the record, not a fixed phrase", () => {
    const line = JSON.stringify({
      level: "ERROR", message: "job dead", jobId: "7", name: "runner.crash",
      reasons: ["released: runner a died with no start on record; attempt given back", "lease_expired: runner b did not settle by x", "lease_expired: runner c did not settle by y"],
    });
    expect(deathSummary(line)).toBe("job 7 (runner.crash) dead after 2 rescues and 1 release; last: lease_expired: runner c did not settle by y");
    expect(countEndings(["failed: Error: a\n    at x", "timeout: lease", "failed: Error: b"])).toBe("2 failures and 1 timeout");
    expect(countEndings(["failed: a", "timeout: b", "lease_expired: c"])).toBe("1 failure, 1 timeout and 1 rescue");
    expect(deathSummary('{"message":"job succeeded"}')).toBeNull();
    expect(deathSummary("not json but names \"job dead\"")).toBeNull();
  });
});

describe("array parameters as Postgres array literals", () => {
  it("quotes every text element, escapes quote and backslash, and writes NULL for null", () => {
    expect(textArray(["a", "", "NULL", 'say "hi"', "back\\slash", null, "a,{b}"])).toBe(
      '{"a","","NULL","say \\"hi\\"","back\\\\slash",NULL,"a,{b}"}',
    );
  });
  it("leaves out trailing nulls, which unnest pads back", () => {
    expect(textArray([null, null])).toBe("{}");
    expect(textArray(["a", null, "b", null])).toBe('{"a",NULL,"b"}');
    expect(numberArray([1, null, -2.5, null])).toBe("{1,NULL,-2.5}");
    expect(numberArray([null])).toBe("{}");
  });
  it("refuses a number Postgres would read as something else", () => {
    expect(() => numberArray([NaN])).toThrow(/finite/);
    expect(() => numberArray([Infinity])).toThrow(/finite/);
  });
  it("joins JSON texts into one JSON array", () => {
    expect(jsonArray(['{"a":"\\""}', "null", "[1]"])).toBe('[{"a":"\\""},null,[1]]');
  });
});
