import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDb, type TestDb } from "./support/db.ts";
import { bigAllowance, runShape, shapeName, waitAllowanceMs, type Shape, type ShapeRun } from "./support/fair-shape.ts";

/**
 * The fair claim under every workload shape: job durations from 1 ms to 2 s
 * (on the runners' clock, an injected one: waits and durations are its time),
 * 1 to 50 slots, prefetch on and off, burst and trickle arrivals, one and
 * several runners. Small tenants arrive behind one tenant's backlog while
 * every slot is busy with it; each small job must start within about a job
 * duration per group ahead of it in turn (the tenant's own earlier jobs
 * included), with no more of the backlog started ahead of it than the
 * runners held when it arrived plus a turn's worth: never behind the backlog.
 */
const SHAPES: Shape[] = [
  { jobMs: 1, slots: 1, prefetch: 0, arrivals: "burst", runners: 1, smallTenants: 3, perTenant: 2 },
  { jobMs: 1, slots: 50, prefetch: 50, arrivals: "trickle", runners: 3, smallTenants: 5, perTenant: 3 },
  { jobMs: 5, slots: 5, prefetch: 10, arrivals: "trickle", runners: 1, smallTenants: 5, perTenant: 3 },
  { jobMs: 20, slots: 20, prefetch: 0, arrivals: "trickle", runners: 1, smallTenants: 5, perTenant: 5 },
  { jobMs: 20, slots: 20, prefetch: 20, arrivals: "burst", runners: 1, smallTenants: 5, perTenant: 2 },
  { jobMs: 200, slots: 1, prefetch: 1, arrivals: "trickle", runners: 2, smallTenants: 2, perTenant: 2 },
  { jobMs: 200, slots: 10, prefetch: 0, arrivals: "burst", runners: 3, smallTenants: 4, perTenant: 2 },
  { jobMs: 2_000, slots: 50, prefetch: 0, arrivals: "burst", runners: 1, smallTenants: 3, perTenant: 1 },
  { jobMs: 2_000, slots: 2, prefetch: 2, arrivals: "trickle", runners: 2, smallTenants: 2, perTenant: 1 },
];

/**
 * What the runners' own pace may add to any wait, on their clock: a few of
 * their 10 ms polls. A loaded host adds nothing: the runners run on a
 * ManualClock that moves only when no query is in flight (support/fair-shape.ts).
 */
const SLACK_MS = 50;
const timeAllowedMs = (s: Shape) => 2 * waitAllowanceMs(s, s.perTenant, SLACK_MS) + s.perTenant * Math.max(s.jobMs, 5);

/** The small jobs that waited longer, or behind more of the backlog, than a fair claim allows. */
function overAllowance(s: Shape, run: ShapeRun) {
  return run.waits.filter((w) => w.bigStartedAhead > bigAllowance(s, w.rank) || w.waitMs > waitAllowanceMs(s, w.rank, SLACK_MS));
}

describe("the fair claim, whatever the workload's shape (pg driver)", () => {
  let t: TestDb;
  let queueNo = 0;
  beforeAll(async () => {
    t = await createTestDb("pg", 12);
  });
  afterAll(() => t.drop());

  it.each(SHAPES.map((s) => [shapeName(s), s] as const))("%s: small tenants start within a turn, not behind the backlog", async (_name, s) => {
    const run = await runShape(t, `shape${queueNo++}`, s, { fair: true, timeAllowedMs: timeAllowedMs(s) });
    const worst = [...run.waits].sort((a, b) => b.waitMs - a.waitMs)[0];
    console.log(`${shapeName(s)}: backlog ${run.bigJobs}; worst small wait ${Math.round(worst?.waitMs ?? -1)} ms ` +
      `(allowed ${waitAllowanceMs(s, worst?.rank ?? 1, SLACK_MS)}), most backlog started ahead ` +
      `${Math.max(...run.waits.map((w) => w.bigStartedAhead))} (allowed ${bigAllowance(s, s.perTenant)})`);
    expect(run.notStarted).toBe(0);
    expect(run.waits).toHaveLength(s.smallTenants * s.perTenant);
    expect(overAllowance(s, run)).toEqual([]);
    // Every job ran once.
    expect(run.startedTwice).toBe(0);
    expect(run.neverStarted).toBe(0);
    expect(run.succeeded).toBe(run.bigJobs + s.smallTenants * s.perTenant);
  });

  it("the allowance tells a claim that ignores groups apart: behind it, small jobs wait for the backlog", async () => {
    const s = SHAPES[3]!;
    const run = await runShape(t, `shape${queueNo++}`, s, { fair: false, timeAllowedMs: timeAllowedMs(s) });
    expect(run.notStarted + overAllowance(s, run).length).toBeGreaterThan(0);
    expect(run.startedTwice).toBe(0);
  });
});
