import { describe, expect, it } from "vitest";
import { checkFaults, type JobRow } from "./support/fault-checker.ts";
import type { OracleEvent } from "./support/oracle.ts";

/** The fault verdict on hand-made histories: each finding, and its absence. */

const start = (job: string, attempt: number, pid: number, t: number, g?: string): OracleEvent => ({ e: "start", job, attempt, pid, t, ...(g ? { g } : {}) });
const end = (job: string, attempt: number, pid: number, t: number, ok = true): OracleEvent => ({ e: "end", job, attempt, pid, t, ok });
const settled = (job: string, attempt: number, pid: number, t: number): OracleEvent => ({ e: "settled", job, attempt, pid, t, outcome: "succeeded", accepted: true });
const row = (id: string, status: string, attempts: number, chargedRows = attempts): JobRow => ({ id, status, attempts, chargedRows });

describe("the fault verdict", () => {
  it("finds nothing wrong in a clean run", () => {
    const v = checkFaults({
      enqueued: ["1", "2"],
      rows: [row("1", "succeeded", 1), row("2", "succeeded", 1)],
      events: [start("1", 1, 10, 0), end("1", 1, 10, 5), settled("1", 1, 10, 6), start("2", 1, 11, 1), end("2", 1, 11, 3)],
    });
    expect(v).toMatchObject({
      lost: [], deadNeverStarted: [], chargedNeverStarted: [], attemptsChargedWithoutStart: 0,
      rerunAfterSuccess: [], duplicates: [], heldByKilled: [], byStatus: { succeeded: 2 },
    });
  });

  it("calls a job lost when its row is missing or it is still running at the end, not when it is queued", () => {
    const v = checkFaults({ enqueued: ["1", "2", "3"], rows: [row("2", "running", 1), row("3", "queued", 0)], events: [start("2", 1, 10, 0)] });
    expect(v.lost).toEqual(["1", "2"]);
  });

  it("finds a dead job whose handler never started, charged for nothing", () => {
    const v = checkFaults({ enqueued: ["1"], rows: [row("1", "dead", 3)], events: [] });
    expect(v.deadNeverStarted).toEqual(["1"]);
    expect(v.chargedNeverStarted).toEqual(["1"]);
    expect(v.attemptsChargedWithoutStart).toBe(3);
  });

  it("counts a charged attempt with no start of that attempt even when a later one started", () => {
    const v = checkFaults({ enqueued: ["1"], rows: [row("1", "succeeded", 2)], events: [start("1", 2, 10, 0), end("1", 2, 10, 1)] });
    expect(v.chargedNeverStarted).toEqual([]);
    expect(v.attemptsChargedWithoutStart).toBe(1);
  });

  it("finds a job run again after its handler succeeded in a live runner", () => {
    const v = checkFaults({
      enqueued: ["1"],
      rows: [row("1", "succeeded", 2)],
      events: [start("1", 1, 10, 0), end("1", 1, 10, 5), start("1", 2, 11, 2_100), end("1", 2, 11, 2_105)],
    });
    expect(v.rerunAfterSuccess).toEqual(["1"]);
    expect(v.duplicates).toEqual(["1"]);
  });

  it("excuses a rerun of what a killed runner held unsettled, but not of what it had settled", () => {
    const history = (settledFirst: boolean) => [
      start("1", 1, 10, 0), end("1", 1, 10, 5), ...(settledFirst ? [settled("1", 1, 10, 6)] : []),
      start("1", 2, 11, 2_100), end("1", 2, 11, 2_105),
    ];
    const held = checkFaults({ enqueued: ["1"], rows: [row("1", "succeeded", 2)], events: history(false), killedPids: new Set([10]) });
    expect(held).toMatchObject({ rerunAfterSuccess: [], duplicates: ["1"], heldByKilled: ["1"], runningInKilled: [] });
    const written = checkFaults({ enqueued: ["1"], rows: [row("1", "succeeded", 2)], events: history(true), killedPids: new Set([10]) });
    expect(written).toMatchObject({ rerunAfterSuccess: ["1"], heldByKilled: [] });
  });

  it("counts handlers of one group running at once; touching intervals do not overlap", () => {
    const v = checkFaults({
      enqueued: ["1", "2", "3"],
      rows: [row("1", "succeeded", 1), row("2", "succeeded", 1), row("3", "succeeded", 1)],
      events: [
        start("1", 1, 10, 0, "a"), start("2", 1, 11, 1, "a"), end("1", 1, 10, 4), end("2", 1, 11, 5),
        start("3", 1, 10, 5, "a"), end("3", 1, 10, 9),
      ],
    });
    expect(v.maxConcurrentPerGroup).toEqual({ a: 2 });
  });
});
