import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelJob, retryDeadJobs, retryJob } from "../shared/lifecycle/manual.ts";
import { getJob, listJobs } from "../shared/observe/admin.ts";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { completeJobs, failJobs } from "../shared/lifecycle/settle.ts";
import { claimable } from "../shared/settings/serving.ts";
import { countReady, pruneJobs, queueStats } from "../shared/observe/stats.ts";
import { createTestDb, drivers, type TestDb } from "./support/db.ts";
import { noop } from "./support/jobs.ts";

describe.each(drivers)("operator actions and views (%s driver)", (driver) => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb(driver);
  });
  afterAll(() => t.drop());

  const killOne = async (queue: string) => {
    const { id } = await enqueue(t, noop, { n: 0 }, { queue, maxAttempts: 1 });
    const [c] = await claimJobs(t, { queue, runnerId: "r", limit: 1, maxLeaseMs: 60_000 });
    await failJobs(t, [{ ...c!, outcome: "failed", error: "kaput", retryDelayMs: 0 }]);
    return id;
  };

  it("cancels a queued job, and nothing else", async () => {
    const { id } = await enqueue(t, noop, { n: 1 }, { queue: "cancel" });
    expect(await cancelJob(t, id)).toMatchObject({ id, status: "cancelled" });
    expect(await cancelJob(t, id)).toBeNull();
    const other = await enqueue(t, noop, { n: 2 }, { queue: "cancel" });
    await claimJobs(t, { queue: "cancel", runnerId: "r", limit: 1, maxLeaseMs: 60_000 });
    expect(await cancelJob(t, other.id)).toBeNull();
    expect((await getJob(t, other.id))!.status).toBe("running");
    expect(await cancelJob(t, "999999999")).toBeNull();
  });

  it("retries a dead job with fresh attempts and keeps its history", async () => {
    const id = await killOne("retry");
    expect((await getJob(t, id))!.status).toBe("dead");
    expect(await retryJob(t, id)).toMatchObject({ id, status: "queued", attempts: 0, generation: 2 });
    expect(await retryJob(t, id)).toBeNull(); // no longer dead
    const [again] = await claimJobs(t, { queue: "retry", runnerId: "r2", limit: 1, maxLeaseMs: 60_000 });
    await completeJobs(t, [again!]);
    const full = (await getJob(t, id))!;
    expect(full.status).toBe("succeeded");
    // The retry is a second generation of the same job; its run numbers go on.
    expect(full.attemptHistory.map((a) => [a.run, a.generation, a.outcome, a.runnerId, a.error])).toEqual([
      [1, 1, "failed", "r", "kaput"],
      [2, 2, "succeeded", "r2", null],
    ]);
    expect(full).toMatchObject({ generation: 2, lastError: null });
  });

  it("returns null for a job that does not exist", async () => {
    expect(await getJob(t, "123456789")).toBeNull();
  });

  it("lists by status and queue, newest first, a page at a time", async () => {
    const dead = [await killOne("list"), await killOne("list"), await killOne("list")];
    await enqueue(t, noop, { n: 1 }, { queue: "list" });
    const first = await listJobs(t, { status: "dead", queue: "list", limit: 2 });
    expect(first.jobs.map((j) => j.id)).toEqual([dead[2], dead[1]]);
    expect(first.nextCursor).toBe(dead[1]);
    const second = await listJobs(t, { status: "dead", queue: "list", limit: 2, cursor: first.nextCursor! });
    expect(second.jobs.map((j) => j.id)).toEqual([dead[0]]);
    expect(second.nextCursor).toBeNull();
    expect((await listJobs(t, { queue: "list", name: "noop" })).jobs).toHaveLength(4);
  });

  it("counts ready, delayed, running and dead per queue, with the oldest ready age", async () => {
    await killOne("stats");
    await enqueueJobs(t, [
      job(noop, { n: 1 }, { queue: "stats", runAt: new Date(Date.now() - 10_000) }),
      job(noop, { n: 2 }, { queue: "stats" }),
      job(noop, { n: 3 }, { queue: "stats", priority: 5 }),
      job(noop, { n: 4 }, { queue: "stats", delayMs: 60_000 }),
    ]);
    const [claimed] = await claimJobs(t, { queue: "stats", runnerId: "r", limit: 1, maxLeaseMs: 60_000 });
    expect(claimed!.payload).toEqual({ n: 3 });
    const stats = (await queueStats(t)).find((s) => s.queue === "stats")!;
    expect(stats).toMatchObject({ ready: 2, delayed: 1, running: 1, dead: 1 });
    expect(stats.oldestReadyAgeSeconds).toBeGreaterThanOrEqual(9);
    expect(stats.oldestReadyAgeSeconds).toBeLessThan(60);
    const can = claimable({ runners: { r: { queues: ["stats"], maxLeaseMs: 60_000 } } }, ["noop"]);
    expect(await countReady(t, can, 1)).toBe(1);
    expect(await countReady(t, can, 100)).toBe(2);
  });

  it("prunes finished jobs older than the retention, with their attempts", async () => {
    const old = await killOne("prune");
    const fresh = await killOne("prune");
    const pending = await enqueue(t, noop, { n: 9 }, { queue: "prune" });
    await t.admin.query(`update "${t.schema}".jobs set finished_at = now() - interval '8 days' where id = $1`, [old]);
    const progress: number[] = [];
    const deleted = await pruneJobs(t, 7 * 24 * 3600_000, { batchSize: 1, onProgress: (n) => progress.push(n) });
    expect(deleted).toBe(1);
    expect(progress.at(-1)).toBe(1);
    expect(await getJob(t, old)).toBeNull();
    expect(await getJob(t, fresh)).not.toBeNull();
    expect(await getJob(t, pending.id)).not.toBeNull();
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".attempts where job_id = $1`, [old]);
    expect(rows[0]!.n).toBe(0);
  });
});

describe.each(drivers)("listing and bulk retry across id widths (%s driver)", (driver) => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb(driver);
  });
  afterAll(() => t.drop());

  it("pages in numeric id order, across 9 -> 10 -> 11, and bulk-retries every dead job once", async () => {
    const { noop } = await import("./support/jobs.ts");
    const ids = (await enqueueJobs(t, Array.from({ length: 11 }, (_, n) => job(noop, { n }, { queue: "wide", maxAttempts: 1 })))).map((r) => r.id);
    await t.admin.query(`update "${t.schema}".jobs set status = 'dead', finished_at = now() where queue = 'wide'`);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await listJobs(t, { status: "dead", queue: "wide", limit: 2, cursor });
      seen.push(...page.jobs.map((j) => j.id));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    expect(seen).toEqual([...ids].sort((a, b) => Number(b) - Number(a)));
    let retried = 0;
    let beforeId: string | undefined;
    do {
      const batch = await retryDeadJobs(t, { queue: "wide", beforeId, limit: 4 });
      retried += batch.retried;
      beforeId = batch.nextBeforeId ?? undefined;
    } while (beforeId);
    expect(retried).toBe(11);
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where queue = 'wide' and status = 'queued' and attempts = 0`);
    expect(rows[0]!.n).toBe(11);
  });
});
