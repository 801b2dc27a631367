import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import type { Queryable } from "../shared/db/db.ts";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { defineJob } from "../shared/jobs/job.ts";
import { rescueExpiredLeases } from "../shared/lifecycle/rescue.ts";
import { describeDeaths } from "../shared/observe/deaths.ts";
import { completeJobs, failJobs, settleJobs } from "../shared/lifecycle/settle.ts";
import { createTestDb, drivers, expireLeases, type TestDb } from "./support/db.ts";

// Leases are long; a runner's death is its lease moved into the past
// (`expireLeases`), not waited for.
const brief = defineJob({ name: "brief", schema: z.object({}), handler: () => {}, leaseMs: 60_000, backoffMs: 0 });

describe.each(drivers)("rescue (%s driver)", (driver) => {
  let t: TestDb;
  let queueNo = 0;
  const freshQueue = () => `r${queueNo++}`;
  beforeAll(async () => {
    t = await createTestDb(driver);
  });
  afterAll(() => t.drop());

  const row = async (id: string) => (await t.admin.query<any>(`select * from "${t.schema}".jobs where id = $1`, [id])).rows[0]!;
  const attemptRows = async (id: string) =>
    (await t.admin.query<any>(`select * from "${t.schema}".attempts where job_id = $1 order by ended_at, attempt`, [id])).rows;
  // Claims as a runner does, and records that every handler started (the
  // runner's next write), unless `started` is false.
  const leasesRunOut = (queue: string) => expireLeases(t, "queue = $1", [queue]);
  const claimAll = async (queue: string, runnerId: string, suspects = false, started = true) => {
    const claimed = await claimJobs(t, { queue, runnerId, limit: 1000, maxLeaseMs: 60_000, suspects });
    if (started) await settleJobs(t, { started: claimed });
    return claimed;
  };

  it("a job claimed 3 times whose runner never settles ends dead with 3 lease_expired attempts", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, brief, {}, { queue });
    let starts = 0;
    const outcomes = [];
    for (let pass = 1; pass <= 5; pass++) {
      // Before its last attempt, after a death, the job is a suspect: claimed
      // apart, to run alone.
      if (pass === 3) expect(await claimAll(queue, "ordinary-claim")).toEqual([]);
      const claimed = await claimAll(queue, `runner-${pass}`, pass === 3);
      starts += claimed.length;
      await leasesRunOut(queue); // the runner dies: its lease runs out
      outcomes.push(await rescueExpiredLeases(t));
    }
    expect(starts).toBe(3);
    expect(outcomes.map((o) => [o.rescued, o.dead])).toEqual([[1, 0], [1, 0], [0, 1], [0, 0], [0, 0]]);
    expect(outcomes[2]!.deadIds).toEqual([id]);
    expect(await describeDeaths(t, [id])).toEqual([
      { id, queue, name: "brief", attempts: 3, reasons: [expect.stringMatching(/^lease_expired: /), expect.stringMatching(/^lease_expired: /), expect.stringMatching(/^lease_expired: runner runner-3 did not settle/)] },
    ]);
    expect(await row(id)).toMatchObject({ status: "dead", attempts: 3, lease_token: null, suspect: false });
    const attempts = await attemptRows(id);
    expect(attempts.map((a) => [a.attempt, a.outcome, a.runner_id])).toEqual([
      [1, "lease_expired", "runner-1"],
      [2, "lease_expired", "runner-2"],
      [3, "lease_expired", "runner-3"],
    ]);
    for (const a of attempts) expect(a.ended_at.getTime()).toBeGreaterThan(a.claimed_at.getTime());
  });

  it("re-queues with backoff when attempts are left", async () => {
    const slow = defineJob({ name: "slow-backoff", schema: z.object({}), handler: () => {}, leaseMs: 60_000, backoffMs: 60_000 });
    const queue = freshQueue();
    const { id } = await enqueue(t, slow, {}, { queue });
    await claimAll(queue, "r");
    await leasesRunOut(queue);
    const result = await rescueExpiredLeases(t, { random: () => 0 });
    expect(result.rescued).toBeGreaterThanOrEqual(1);
    const after = await row(id);
    expect(after.status).toBe("queued");
    // equal jitter with random() = 0: half of the 60 s base
    expect(after.run_at.getTime()).toBeGreaterThan(Date.now() + 25_000);
    expect(await claimAll(queue, "r")).toEqual([]);
  });

  it("leaves valid leases alone", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, defineJob({ name: "long", schema: z.object({}), handler: () => {} }), {}, { queue });
    await claimAll(queue, "r");
    await rescueExpiredLeases(t);
    expect(await row(id)).toMatchObject({ status: "running" });
    expect(await attemptRows(id)).toEqual([]);
  });

  it("a late settle after a rescue changes nothing", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, brief, {}, { queue });
    const [claimed] = await claimAll(queue, "late");
    await leasesRunOut(queue);
    await rescueExpiredLeases(t);
    const before = await row(id);
    expect((await completeJobs(t, [claimed!])).size).toBe(0);
    expect((await failJobs(t, [{ ...claimed!, outcome: "failed", error: "late", retryDelayMs: 0 }])).size).toBe(0);
    expect(await row(id)).toEqual(before);
    expect((await attemptRows(id)).map((a) => a.outcome)).toEqual(["lease_expired"]);
  });

  it("a settle arriving after the lease expired is refused, before or after the rescue writes", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, brief, {}, { queue });
    const [claimed] = await claimAll(queue, "racer");
    await leasesRunOut(queue);
    // The runner's settle slipped in right after the rescue has read the
    // expired lease and before it writes: fencing refuses it all the same.
    let reads = 0;
    const racing: Queryable = {
      async query(text, values) {
        const result = await t.db.query(text, values);
        if (reads++ === 0) {
          const settled = await failJobs(t, [{ ...claimed!, outcome: "timeout", error: "runner saw its timeout", retryDelayMs: 0 }]);
          expect(settled.size).toBe(0);
        }
        return result as never;
      },
    };
    const result = await rescueExpiredLeases({ db: racing, schema: t.schema });
    expect(result).toMatchObject({ rescued: 1, dead: 0 });
    expect((await attemptRows(id)).map((a) => a.outcome)).toEqual(["lease_expired"]);
    expect(await row(id)).toMatchObject({ status: "queued", attempts: 1 });
  });

  it("gives the attempt back to a job whose handler never started, and says so", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, brief, {}, { queue });
    await claimAll(queue, "buffered", false, false);
    await leasesRunOut(queue);
    expect(await rescueExpiredLeases(t)).toMatchObject({ rescued: 0, refunded: 1, dead: 0 });
    expect(await row(id)).toMatchObject({ status: "queued", attempts: 0, owes_attempt: true, suspect: false });
    expect((await attemptRows(id)).map((a) => [a.attempt, a.outcome, a.error])).toEqual([
      [1, "released", "runner buffered died with no start on record; attempt given back"],
    ]);
  });

  it("charges an owed attempt with a failure too, and keeps recording the job's start first", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, brief, {}, { queue });
    await claimAll(queue, "died-unrecorded", false, false);
    await leasesRunOut(queue);
    await rescueExpiredLeases(t); // given back: attempts 0, owed
    const [again] = await claimAll(queue, "times-out");
    expect((await failJobs(t, [{ ...again!, outcome: "timeout", error: "aborted", retryDelayMs: 0 }])).get(id)).toBe("queued");
    // The aborted handler may still kill its runner: its next start is recorded first.
    expect(await row(id)).toMatchObject({ attempts: 2, owes_attempt: false, start_first: true });
  });

  it("a job that kills its runner before its start is recorded still starts exactly max_attempts times", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, brief, {}, { queue });
    let starts = 0;
    for (let death = 1; death <= 5; death++) {
      const claimed = await claimJobs(t, { queue, runnerId: `killed-${death}`, limit: 1, maxLeaseMs: 60_000, suspects: death === 3 });
      for (const c of claimed) {
        // The runner records the start before the handler only for a job
        // that owes an attempt; the first death comes before any write.
        if (c.startFirst) expect((await settleJobs(t, { started: [c] })).started.has(c.id)).toBe(true);
        starts++;
      }
      await leasesRunOut(queue);
      await rescueExpiredLeases(t);
    }
    expect(starts).toBe(3);
    expect(await row(id)).toMatchObject({ status: "dead", attempts: 3, owes_attempt: false, start_first: true });
    expect((await attemptRows(id)).map((a) => [a.attempt, a.outcome])).toEqual([
      [1, "released"], [2, "lease_expired"], [3, "lease_expired"],
    ]);
  });

  it("racing rescues and settles record each attempt exactly once", async () => {
    const queue = freshQueue();
    await enqueueJobs(t, Array.from({ length: 300 }, () => job(brief, {}, { queue })));
    const claimed = await claimAll(queue, "crowd");
    await leasesRunOut(queue);
    const settles = Array.from({ length: 6 }, (_, i) =>
      failJobs(t, claimed.filter((_, n) => n % 6 === i).map((c) => ({ ...c, outcome: "timeout" as const, error: "t", retryDelayMs: 0 }))),
    );
    const rescues = Array.from({ length: 3 }, () => rescueExpiredLeases(t, { pageSize: 40 }));
    const [settled, rescued] = await Promise.all([Promise.all(settles), Promise.all(rescues)]);
    const bySettle = settled.reduce((n, m) => n + m.size, 0);
    // A rescue records a started attempt (rescued, dead) or gives an unstarted one back (refunded): each once.
    const byRescue = rescued.reduce((n, r) => n + r.rescued + r.dead + r.refunded, 0);
    expect(bySettle + byRescue).toBe(300);
    const { rows } = await t.admin.query<{ n: number; jobs: number }>(
      `select count(*)::int as n, count(distinct job_id)::int as jobs from "${t.schema}".attempts a
       join "${t.schema}".jobs j on j.id = a.job_id where j.queue = $1`,
      [queue],
    );
    expect(rows[0]).toEqual({ n: 300, jobs: 300 });
  });

  it("rescues a large backlog of expired leases in pages", async () => {
    const queue = freshQueue();
    await enqueueJobs(t, Array.from({ length: 1_200 }, () => job(brief, {}, { queue })));
    await claimAll(queue, "pager");
    await claimAll(queue, "pager");
    await leasesRunOut(queue);
    const result = await rescueExpiredLeases(t, { pageSize: 250 });
    // Every handler was marked started before its lease ran out: each is a rescue, none a refund.
    expect(result).toMatchObject({ rescued: 1_200, refunded: 0 });
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where queue = $1 and status = 'running'`, [queue]);
    expect(rows[0]!.n).toBe(0);
  });
});
