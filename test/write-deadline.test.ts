import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { z } from "zod";
import { createPgPool } from "../shared/db/drivers/pg.ts";
import { queryWithin, WriteDeadlineError, writeDeadlineMs, WRITE_DEADLINE_FLOOR_MS } from "../shared/db/deadline.ts";
import { defineJob } from "../shared/jobs/job.ts";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { claimBatch } from "../shared/lifecycle/claim.ts";
import { systemClock } from "../shared/runner/clock.ts";
import { Completer, type Held, type SettleReport } from "../shared/runner/completer.ts";
import { ManualClock } from "./support/clock.ts";
import { createTestDb, type TestDb } from "./support/db.ts";
import { proxyInFront, type FaultProxy } from "./support/fault-proxy.ts";
import { MemoryDb } from "./support/memory-db.ts";

/**
 * A write that races a lease gives up on its connection in proportion to the
 * time the lease has left, and tries again on another while the lease lasts
 * (shared/db/deadline.ts, the completer). Without that rule a settle on a
 * connection gone silent waits out the driver's query timeout and its lease.
 */

const turns = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

describe("the per-write deadline", () => {
  it("is a third of the lease time left, at least the floor, at most the query timeout", () => {
    expect(writeDeadlineMs(900, 5_000)).toBe(300);
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

describe("the per-write deadline on a real connection gone silent", () => {
  let proxy: FaultProxy;
  let db: TestDb;
  let url: string;
  beforeAll(async () => {
    db = await createTestDb("pg", 2);
    ({ proxy, url } = await proxyInFront(inject("databaseUrl")));
  });
  afterAll(async () => {
    await db?.drop();
    await proxy?.close();
  });

  it("destroys the silent connection at the deadline and answers on a fresh one", async () => {
    const pool = createPgPool(url, { max: 2 });
    await pool.query("select 1");
    expect((pool as unknown as { totalCount: number }).totalCount).toBe(1);
    proxy.stallAll();
    const t0 = Date.now();
    await expect(queryWithin(pool, 200, systemClock, "select 1")).rejects.toBeInstanceOf(WriteDeadlineError);
    expect(Date.now() - t0).toBeLessThan(1_000);
    expect((pool as unknown as { totalCount: number }).totalCount).toBe(0);
    proxy.resume();
    expect((await queryWithin<{ n: number }>(pool, 2_000, systemClock, "select 2 as n")).rows[0]!.n).toBe(2);
    await pool.end();
  });

  it("lands a success within its 1 s lease though its first connection goes silent (the driver's timeout is 5 s)", async () => {
    const type = defineJob({ name: "deadline.t", schema: z.object({}), queue: "deadline", leaseMs: 1_000, handler: () => {} });
    await enqueue(db, type, {});
    const { jobs: [job] } = await claimBatch(db, { queue: "deadline", runnerId: "r", limit: 1, maxLeaseMs: 60_000 });
    const deadline = Date.now() + 1_000;
    // Every other new connection goes silent once started, the first among them: the settle's first try stalls.
    proxy.stallFraction(0.5, { afterBytes: 0 });
    const pool = createPgPool(url, { max: 2 });
    const reports: SettleReport[] = [];
    const completer = new Completer({ store: { db: pool, schema: db.schema }, clock: systemClock, onSettled: (r) => void reports.push(r) });
    completer.succeed({ id: job!.id, leaseToken: job!.leaseToken, deadline });
    await completer.drain();
    proxy.stallFraction(0);
    expect(reports.map((r) => [r.kind, r.accepted, r.abandoned])).toEqual([["succeeded", true, undefined]]);
    expect(Date.now()).toBeLessThan(deadline);
    expect(proxy.counters.stalled).toBeGreaterThan(0);
    const { rows } = await db.admin.query<{ status: string }>(`select status::text from "${db.schema}".jobs where id = $1`, [job!.id]);
    expect(rows[0]!.status).toBe("succeeded");
    await pool.end().catch(() => {});
  });
});
