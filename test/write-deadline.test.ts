import { describe, expect, it } from "vitest";
import { writeDeadlineMs, WRITE_DEADLINE_FLOOR_MS } from "../shared/db/deadline.ts";
import { Completer, type Held, type SettleReport } from "../shared/runner/completer.ts";
import { ManualClock } from "./support/clock.ts";
import { MemoryDb } from "./support/memory-db.ts";

/**
 * A write that races a lease gives up on its connection in proportion to the
 * time the lease has left, and tries again on another while the lease lasts
 * (shared/db/deadline.ts, the completer). Without that rule a settle on a
 * connection gone silent waits out the driver's query timeout and its lease.
 * Here on a ManualClock and an in-memory database; the same on a real
 * connection gone silent behind the fault proxy is in lease-faults.test.ts.
 */

const turns = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

describe("the per-write deadline", () => {
  it("is a third of the lease time left, at least the floor, at most the query timeout", () => {
    expect(writeDeadlineMs(1_500, 5_000)).toBe(500);
    expect(writeDeadlineMs(60_000, 5_000)).toBe(5_000);
    expect(writeDeadlineMs(120, 5_000)).toBe(WRITE_DEADLINE_FLOOR_MS);
    expect(writeDeadlineMs(-5, 5_000)).toBe(WRITE_DEADLINE_FLOOR_MS);
  });

  const setup = () => {
    const clock = new ManualClock();
    const db = new MemoryDb(clock);
    const reports: SettleReport[] = [];
    const completer = new Completer({ store: { db, schema: "leasehold" }, clock, random: () => 1, onSettled: (r) => void reports.push(r) });
    const held = (leaseMs: number): Held => {
      const [id] = db.add(1, { status: "running", attempts: 1, runs: 1, leaseMs, leaseEndsAt: clock.now() + leaseMs });
      const job = db.jobs.get(id!)!;
      job.token = `00000000-0000-0000-0000-${id!.padStart(12, "0")}`;
      return { id: id!, leaseToken: job.token, deadline: clock.now() + leaseMs };
    };
    return { clock, db, completer, reports, held };
  };

  it("abandons a settle stalled on its connection after a third of the lease left, and lands it on the next try", async () => {
    const { clock, db, completer, reports, held } = setup();
    const a = held(1_200);
    // The first settle's connection goes silent: it never answers.
    db.before = (s) => (s.kind === "settle" && db.of("settle").length === 1 ? new Promise<void>(() => {}) : undefined);
    completer.succeed(a);
    await turns();
    const first = db.of("settle")[0]!.at;
    await clock.advance(399);
    expect(db.of("settle").length).toBe(1);
    await clock.advance(1);
    await turns(10);
    // No backoff after a deadline: the retry (after the look-up of what the lost try applied) goes at once.
    expect(db.sent.map((s) => [s.kind, s.at - first])).toEqual([["settle", 0], ["settledEarlier", 400], ["settle", 400]]);
    expect(reports).toEqual([{ lease: a, kind: "succeeded", accepted: true, status: undefined }]);
    expect(db.jobs.get(a.id)!.status).toBe("succeeded");
  });

  it("writes a timeout at once on a write of its own, not behind an ordinary write in flight", async () => {
    const { clock, db, completer, reports, held } = setup();
    const slow = held(30_000);
    const overrun = held(1_000);
    db.before = (s) => (s.kind === "settle" && s.parts?.succeeded ? new Promise<void>(() => {}) : undefined);
    completer.succeed(slow);
    completer.markStarted(overrun);
    await turns();
    completer.fail({ ...overrun, outcome: "timeout", error: "timeout", permanent: false, retryDelayMs: 0 });
    await turns();
    expect(db.of("settle").map((s) => s.parts)).toEqual([{ started: [overrun.id], succeeded: [slow.id] }, { failed: [overrun.id] }]);
    expect(reports.map((r) => [r.lease.id, r.kind, r.accepted])).toEqual([[overrun.id, "failed", true]]);
    expect(db.jobs.get(overrun.id)!.status).toBe("queued");
    db.before = undefined;
    await clock.advance(10_000);
    await completer.drain();
    expect(reports.map((r) => [r.lease.id, r.accepted])).toEqual([[overrun.id, true], [slow.id, true]]);
  });
});
