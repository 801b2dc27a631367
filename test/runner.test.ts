import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { rescueExpiredLeases } from "../shared/lifecycle/rescue.ts";
import { settleJobs } from "../shared/lifecycle/settle.ts";
import { runWorker, type WorkerLog } from "../shared/runner/worker.ts";
import { nextTurn } from "../shared/runner/clock.ts";
import { createTestDb, databaseUrl, drivers, expireLeases, type Driver, type TestDb } from "./support/db.ts";
import { createNeonPool } from "../shared/db/drivers/neon.ts";
import { createPgPool } from "../shared/db/drivers/pg.ts";
import { inject } from "vitest";
import WebSocket from "ws";

/**
 * The runner loop against real faults and at its edges: exits, leases, stale
 * settles, suspects. Nothing here waits on the clock: a handler's work is a
 * few turns of the event loop or a gate, a dead runner's lease is moved into
 * the past (`expireLeases`), and the time left is the `remainingMs` the test
 * gives. (The database gone silent, a fault timed by real network timeouts,
 * is in faults.test.ts.)
 */

/** A handler's work: `turns` turns of the event loop, others running meanwhile. */
const busy = async (turns: number) => {
  for (let i = 0; i < turns; i++) await nextTurn();
};

/** A pool whose connections carry `application_name`, so a test can terminate exactly them. */
function namedPool(driver: Driver, name: string) {
  const url = `${databaseUrl()}${databaseUrl().includes("?") ? "&" : "?"}application_name=${name}`;
  return driver === "pg"
    ? createPgPool(url, { max: 6, queryTimeoutMs: 3_000 })
    : createNeonPool(url, { max: 6, wsProxy: inject("wsRelay"), webSocketConstructor: WebSocket, queryTimeoutMs: 3_000 });
}

/** Every handler start and end, in order: the oracle the assertions read. */
class Oracle {
  readonly events: { id: number; event: "start" | "end" }[] = [];
  starts(id: number) {
    return this.events.filter((e) => e.id === id && e.event === "start").length;
  }
}

describe.each(drivers)("the runner under faults (%s driver)", (driver) => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb(driver, 6);
  });
  afterAll(() => t.drop());

  const rows = async (queue: string) =>
    (await t.admin.query<{ id: string; status: string; attempts: number; runs: number }>(
      `select id::text, status::text, attempts, runs from "${t.schema}".jobs where queue = $1 order by id`, [queue])).rows;

  it("survives its connections being terminated again and again: every job runs once, every outcome is written", async () => {
    const queue = `kill-${driver}`;
    const oracle = new Oracle();
    const app = `victim_${randomBytes(4).toString("hex")}`;
    let cutRounds = 0;
    const kills: Promise<void>[] = [];
    // Every 40th start cuts all the runner's connections, in the middle of its
    // work (kill rounds paced by the run itself, not by a clock). A round that
    // comes before the pool has connected again after the last one looks
    // again, a round trip later, until it has cut something or the runner is
    // done.
    let done = false;
    const kill = () => kills.push((async () => {
      while (!done) {
        const { rows } = await t.admin.query<{ n: number }>(
          "select count(pg_terminate_backend(pid))::int as n from pg_stat_activity where application_name = $1", [app]);
        if (rows[0]!.n > 0) return void cutRounds++;
      }
    })());
    const worked = defineJob({
      name: `work-${driver}`, schema: z.object({ n: z.number() }), queue, backoffMs: 0,
      handler: async ({ n }) => {
        oracle.events.push({ id: n, event: "start" });
        if (n % 40 === 20) kill();
        await busy(1 + (n % 5));
        oracle.events.push({ id: n, event: "end" });
      },
    });
    const n = 400;
    await enqueueJobs(t, Array.from({ length: n }, (_, i) => job(worked, { n: i })));
    const pool = namedPool(driver, app);
    const warnings: string[] = [];
    const log: WorkerLog = { info() {}, warn: (m) => warnings.push(m), error: (m) => warnings.push(m) };
    const registry = createRegistry([worked]);
    const first = await runWorker({ linger: "fixed", store: { db: pool, schema: t.schema }, registry, queues: [queue], runnerId: "victim", slots: 10, idleMs: 300, pollMs: 20, log });
    done = true;
    await Promise.all(kills);
    await pool.end();
    expect(cutRounds).toBeGreaterThan(2);
    expect(warnings.filter((w) => w.includes("retrying")).length).toBeGreaterThan(0);
    expect(first.stale).toBe(0);
    // A claim whose answer was lost holds its jobs until their leases run
    // out: the rescuer gives them back uncharged, and a second runner ends it.
    await expireLeases(t, "queue = $1", [queue]);
    await rescueExpiredLeases(t);
    const second = await runWorker({ linger: "fixed", store: t, registry, queues: [queue], runnerId: "second", slots: 10, idleMs: 200, pollMs: 20 });
    expect(first.succeeded + second.succeeded).toBe(n);
    const all = await rows(queue);
    expect(all.filter((r) => r.status === "succeeded")).toHaveLength(n);
    expect(all.every((r) => r.attempts === 1)).toBe(true);
    for (let i = 0; i < n; i++) expect(oracle.starts(i)).toBe(1);
    const { rows: attempts } = await t.admin.query<{ outcome: string; n: number }>(
      `select outcome::text, count(*)::int as n from "${t.schema}".attempts a join "${t.schema}".jobs j on j.id = a.job_id
       where j.queue = $1 group by 1 order by 1`, [queue]);
    expect(attempts.find((a) => a.outcome === "succeeded")?.n).toBe(n);
    expect(attempts.filter((a) => a.outcome !== "succeeded" && a.outcome !== "released")).toEqual([]);
  }, 60_000);

  it("waits for its handlers and writes their outcomes when time runs out mid-run", async () => {
    const queue = `inflight-${driver}`;
    let started = 0;
    let ended = 0;
    // The handlers end only after the runner has seen its time run out (and two
    // round trips to the database more): a runner that did not wait would be gone.
    let timeUp!: () => void;
    const seenTimeUp = new Promise<void>((r) => (timeUp = r)).then(() => t.admin.query("select 1")).then(() => t.admin.query("select 1"));
    const slow = defineJob({
      name: `inflight-${driver}`, schema: z.object({}), queue, leaseMs: 5_000,
      handler: async () => { started++; await seenTimeUp; ended++; },
    });
    await enqueueJobs(t, Array.from({ length: 6 }, () => job(slow, {})));
    // Time runs out as soon as the first handlers are under way.
    const summary = await runWorker({
      linger: "fixed",
      store: t, registry: createRegistry([slow]), queues: [queue], runnerId: "w", slots: 3, prefetch: 3,
      remainingMs: () => (started === 0 ? 10_000 : (timeUp(), 0)), idleMs: 1_000, pollMs: 20,
    });
    expect(summary.exit).toBe("time");
    expect(ended).toBe(started);
    expect(started).toBe(3);
    expect(summary).toMatchObject({ claimed: 6, succeeded: 3, released: 3, stale: 0 });
    // Nothing is left running: what ran is written, what never started is back, uncharged.
    expect((await rows(queue)).map((r) => [r.status, r.attempts]).sort()).toEqual([
      ["queued", 0], ["queued", 0], ["queued", 0], ["succeeded", 1], ["succeeded", 1], ["succeeded", 1],
    ]);
  });

  it("counts and logs a settle refused because the lease was taken away, and writes nothing for it", async () => {
    const queue = `stale-${driver}`;
    const warnings: string[] = [];
    const victim = defineJob({
      name: `stale-${driver}`, schema: z.object({}), queue,
      handler: async (_p, ctx) => {
        // Another runner holds it now (as after a rescue and a new claim).
        await t.admin.query(`update "${t.schema}".jobs set lease_token = gen_random_uuid() where id = $1`, [ctx.jobId]);
      },
    });
    const { id } = await enqueue(t, victim, {});
    const settled: boolean[] = [];
    const summary = await runWorker({
      linger: "fixed",
      store: t, registry: createRegistry([victim]), queues: [queue], runnerId: "w", slots: 1, idleMs: 100, pollMs: 20,
      log: { info() {}, warn: (m) => warnings.push(m), error() {} }, onSettled: (e) => settled.push(e.accepted),
    });
    expect(summary).toMatchObject({ succeeded: 0, stale: 1 });
    expect(settled).toEqual([false]);
    expect(warnings).toContain("stale settle refused: lease lost");
    expect((await rows(queue))[0]).toMatchObject({ id, status: "running" });
  });

  it("re-enqueues with the dedupe key of the job that is running, and gets that job back", async () => {
    const queue = `dedupe-${driver}`;
    const seen: { id: string; existing: boolean }[] = [];
    const self: ReturnType<typeof defineJob<z.ZodObject<{ k: z.ZodString }>>> = defineJob({
      name: `dedupe-self-${driver}`, schema: z.object({ k: z.string() }), queue,
      handler: async ({ k }, ctx) => void seen.push(await ctx.enqueue(self, { k }, { dedupeKey: k })),
    });
    const { id } = await enqueue(t, self, { k: "a" }, { dedupeKey: "a" });
    const summary = await runWorker({ linger: "fixed", store: t, registry: createRegistry([self]), queues: [queue], runnerId: "w", slots: 2, idleMs: 100, pollMs: 20 });
    expect(seen).toEqual([{ id, existing: true }]);
    expect(summary).toMatchObject({ claimed: 1, succeeded: 1 });
    expect(await rows(queue)).toHaveLength(1);
  });

  it("runs a suspect alone even when it fails, clears the suspicion, and goes on with the rest", async () => {
    const queue = `suspect-fail-${driver}`;
    let running = 0;
    let besideSuspect = 0;
    const work = defineJob({
      name: `suspect-fail-${driver}`, schema: z.object({ suspect: z.boolean() }), queue, backoffMs: 0, maxAttempts: 3,
      handler: async ({ suspect }) => {
        running++;
        await busy(4);
        if (suspect) besideSuspect = Math.max(besideSuspect, running - 1);
        running--;
        if (suspect) throw new Error("still broken");
      },
    });
    const { id } = await enqueue(t, work, { suspect: true });
    for (const runner of ["dead-1", "dead-2"]) {
      const claimed = await claimJobs(t, { queue, runnerId: runner, limit: 1, maxLeaseMs: 60_000, });
      await settleJobs(t, { started: claimed });
      await expireLeases(t, "queue = $1", [queue]); // the runner died: its lease ran out
      await rescueExpiredLeases(t);
    }
    await enqueueJobs(t, Array.from({ length: 6 }, () => job(work, { suspect: false })));
    const summary = await runWorker({ linger: "fixed", store: t, registry: createRegistry([work]), queues: [queue], runnerId: "w", slots: 4, idleMs: 200, pollMs: 20 });
    expect(summary).toMatchObject({ succeeded: 6, failed: 1 });
    expect(besideSuspect).toBe(0);
    const { rows: job1 } = await t.admin.query(`select status::text, suspect, attempts from "${t.schema}".jobs where id = $1`, [id]);
    expect(job1[0]).toEqual({ status: "dead", suspect: false, attempts: 3 });
  });

  it("hands a follow-up to itself only when its lease fits the remaining time less the margin", async () => {
    const queue = `handoff-${driver}`;
    const child = defineJob({ name: `handoff-child-${driver}`, schema: z.object({ leaseMs: z.number() }), queue, leaseMs: 1_800, handler: () => {} });
    const short = defineJob({ name: `handoff-short-${driver}`, schema: z.object({}), queue, leaseMs: 1_000, handler: () => {} });
    const parent = defineJob({
      name: `handoff-parent-${driver}`, schema: z.object({}), queue, leaseMs: 1_000,
      handler: async (_p, ctx) => {
        await ctx.enqueue(child, { leaseMs: 1_800 });
        await ctx.enqueue(short, {});
      },
    });
    await enqueue(t, parent, {});
    // 2 s left for the whole run: time the test holds still (the runner's
    // only clock for its deadline), so no slow machine eats into it.
    const summary = await runWorker({
      linger: "fixed",
      store: t, registry: createRegistry([parent, child, short]), queues: [queue], runnerId: "tight", slots: 2,
      remainingMs: () => 2_000, marginMs: 500, idleMs: 100, pollMs: 20,
    });
    // 2 s left less a 0.5 s margin: the 1 s child is handed off and runs;
    // the 1.8 s child is only enqueued, for a runner with time for it.
    expect(summary).toMatchObject({ claimed: 2, succeeded: 2 });
    const { rows: jobs } = await t.admin.query<{ name: string; status: string; attempts: number }>(
      `select name, status::text, attempts from "${t.schema}".jobs where queue = $1 order by id`, [queue]);
    expect(jobs.map((j) => [j.name.replace(`-${driver}`, ""), j.status, j.attempts])).toEqual([
      ["handoff-parent", "succeeded", 1], ["handoff-child", "queued", 0], ["handoff-short", "succeeded", 1],
    ]);
  });
});

describe("a runner given several suspects among ordinary jobs", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 4);
  });
  afterAll(() => t.drop());

  it("runs each suspect alone, one after another, and the ordinary jobs beside each other", async () => {
    const queue = "suspects-alone";
    let running = 0;
    let besideSuspect = 0;
    let peak = 0;
    const ran: boolean[] = [];
    const work = defineJob({
      name: "suspects-alone", schema: z.object({ suspect: z.boolean() }), queue, backoffMs: 0, maxAttempts: 2,
      handler: async ({ suspect }) => {
        peak = Math.max(peak, ++running);
        ran.push(suspect);
        if (suspect) besideSuspect = Math.max(besideSuspect, running - 1);
        await busy(3);
        if (suspect) besideSuspect = Math.max(besideSuspect, running - 1);
        running--;
      },
    });
    await enqueueJobs(t, Array.from({ length: 3 }, () => job(work, { suspect: true })));
    // Their runner dies holding them after their handlers started: each is now a suspect.
    const held = await claimJobs(t, { queue, runnerId: "died", limit: 3, maxLeaseMs: 60_000 });
    await settleJobs(t, { started: held });
    await expireLeases(t, "queue = $1", [queue]); // the runner died: the leases ran out
    expect((await rescueExpiredLeases(t)).rescued).toBe(3);
    await enqueueJobs(t, Array.from({ length: 8 }, () => job(work, { suspect: false })));
    const summary = await runWorker({
      linger: "fixed", store: t, registry: createRegistry([work]), queues: [queue], runnerId: "alone", slots: 4, idleMs: 100, pollMs: 20,
    });
    expect(summary).toMatchObject({ claimed: 11, succeeded: 11 });
    expect(ran.filter((s) => s)).toHaveLength(3);
    // Nothing ran beside a suspect, yet the ordinary jobs did not run one at a time.
    expect(besideSuspect).toBe(0);
    expect(peak).toBeGreaterThan(1);
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where queue = $1 and status = 'succeeded'`, [queue]);
    expect(rows[0]!.n).toBe(11);
  });
});

describe("a follow-up after a claim that filled its batch", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 4);
  });
  afterAll(() => t.drop());

  /** A queue's jobs in the order their handlers started, and whether each was inserted claimed (its start is its insert). */
  const started = async (queue: string) =>
    (await t.admin.query<{ name: string; status: string; attempts: number; inserted_claimed: boolean }>(
      `select name, status::text, attempts, started_at = created_at as inserted_claimed
       from "${t.schema}".jobs where queue = $1 order by started_at, id`, [queue])).rows;

  /**
   * One slot and no prefetch: the runner's first claim asks for one job and
   * gets it, so it cannot tell whether the queue is drained. Before, every
   * follow-up after such a claim was enqueued and claimed again; now the
   * insert looks whether a job the runner could claim waits ahead.
   */
  const chain = (queue: string, extra: ReturnType<typeof defineJob<any>>[] = []) => {
    const order: string[] = [];
    const child = defineJob({ name: `${queue}-child`, schema: z.object({}), queue, handler: () => void order.push("child") });
    const parent = defineJob({
      name: `${queue}-parent`, schema: z.object({}), queue,
      handler: async (_p, ctx) => {
        order.push("parent");
        await ctx.enqueue(child, {});
      },
    });
    const run = () => runWorker({
      linger: "fixed", store: t, registry: createRegistry([parent, child, ...extra]), queues: [queue], runnerId: `${queue}-runner`,
      slots: 1, prefetch: 0, idleMs: 100, pollMs: 20, maxLeaseMs: 60_000,
    });
    return { order, child, parent, run };
  };

  it("hands the follow-up off when nothing it could claim waits ahead, though its last claim was full", async () => {
    const queue = "full-claim-handoff";
    // Ahead of the child in the queue, but not for this runner: a type it
    // does not know, a lease longer than it takes, a job due later, a job of
    // a lower priority.
    const foreign = defineJob({ name: `${queue}-foreign`, schema: z.object({}), queue, handler: () => {} });
    const long = defineJob({ name: `${queue}-long`, schema: z.object({}), queue, leaseMs: 120_000, handler: () => {} });
    const later = defineJob({ name: `${queue}-later`, schema: z.object({}), queue, handler: () => {} });
    const low = defineJob({ name: `${queue}-low`, schema: z.object({}), queue, priority: -1, handler: () => {} });
    const c = chain(queue, [long, later, low]);
    await enqueue(t, c.parent, {});
    await enqueue(t, foreign, {});
    await enqueue(t, long, {});
    await enqueue(t, later, {}, { delayMs: 3_600_000 });
    await enqueue(t, low, {});
    const summary = await c.run();
    expect(summary).toMatchObject({ succeeded: 3, failed: 0 });
    expect(c.order).toEqual(["parent", "child"]);
    const rows = await started(queue);
    const byName = (n: string) => rows.find((r) => r.name === `${queue}-${n}`)!;
    // The child was inserted claimed (one round trip, no claim of its own) and started before the lower-priority job.
    expect(byName("child")).toMatchObject({ status: "succeeded", attempts: 1, inserted_claimed: true });
    expect(rows.filter((r) => r.status === "succeeded").map((r) => r.name)).toEqual([`${queue}-parent`, `${queue}-child`, `${queue}-low`]);
    expect([byName("foreign").status, byName("long").status, byName("later").status]).toEqual(["queued", "queued", "queued"]);
  });

  it("enqueues the follow-up behind a job it could claim that waits ahead, which starts first", async () => {
    const queue = "full-claim-behind";
    const other = defineJob({ name: `${queue}-other`, schema: z.object({}), queue, handler: () => void c.order.push("other") });
    const c = chain(queue, [other]);
    await enqueue(t, c.parent, {});
    await enqueue(t, other, {});
    const summary = await c.run();
    expect(summary).toMatchObject({ succeeded: 3, failed: 0 });
    // The older job ahead is not jumped: the child is enqueued, then claimed after it.
    expect(c.order).toEqual(["parent", "other", "child"]);
    expect((await started(queue)).map((r) => [r.name.replace(`${queue}-`, ""), r.status, r.attempts, r.inserted_claimed])).toEqual([
      ["parent", "succeeded", 1, false], ["other", "succeeded", 1, false], ["child", "succeeded", 1, false],
    ]);
  });
});
