import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { cancelJob } from "../shared/lifecycle/manual.ts";
import { getJob } from "../shared/observe/admin.ts";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { waitForJob, waitForJobOn, WaitTimeoutError } from "../shared/observe/wait.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { ManualClock } from "./support/clock.ts";
import { createTestDb, drivers, type TestDb } from "./support/db.ts";

/**
 * The waits' timeouts run on a ManualClock: `timerSet()` says the wait is
 * listening (its timer is set after the LISTEN and the first read), and a
 * timeout comes only when the test moves the clock past it.
 */

describe.each(drivers)("job results and waitForJob (%s driver)", (driver) => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb(driver, 6);
  });
  afterAll(() => t.drop());

  const square = defineJob({
    name: "square",
    queue: "results",
    schema: z.object({ n: z.number(), forRoute: z.boolean().default(false) }),
    handler: async ({ n, forRoute }) => {
      if (forRoute) await routeWaiting; // ends only once the route waits for it (not after a guessed time)
      return { square: n * n, at: "done" };
    },
  });
  const doomed = defineJob({
    name: "doomed",
    queue: "results",
    maxAttempts: 2,
    backoffMs: 0,
    schema: z.object({}),
    handler: () => {
      throw new Error("the card was declined");
    },
  });
  const huge = defineJob({ name: "huge", queue: "results", schema: z.object({}), handler: () => "x".repeat(2_000) });
  const registry = createRegistry([square, doomed, huge]);
  let routeWaiting = Promise.resolve();
  const worker = (idleMs = 300) =>
    runWorker({ linger: "fixed", store: t, registry, queues: ["results"], runnerId: `w-${driver}`, slots: 4, idleMs, pollMs: 20, limits: { maxPayloadBytes: 1_000 } });

  it("a route that enqueues gets the job's result within 50 ms of its success, woken by a notification", async () => {
    const app = new Hono();
    app.post("/square/:n", async (c) => {
      const clock = new ManualClock();
      routeWaiting = clock.timerSet();
      const { id } = await enqueue(t, square, { n: Number(c.req.param("n")), forRoute: true });
      const end = await waitForJobOn(clock, t, id, { timeoutMs: 10_000 });
      return c.json({ end, returnedAt: Date.now() });
    });
    // A warm runner and route, as in a deployment that has been serving: the
    // first job plans the statements on their connections.
    const running = worker(1_000);
    await app.request("/square/1", { method: "POST" });
    // Three jobs, one after the other: the median lag is held to 50 ms (one
    // commit flush on a loaded machine can take most of that by itself).
    const lagsMs: number[] = [];
    for (const n of [7, 8, 9]) {
      const res = await app.request(`/square/${n}`, { method: "POST" });
      const body = (await res.json()) as { end: { status: string; result: unknown; finishedAt: string }; returnedAt: number };
      expect(body.end.status).toBe("succeeded");
      expect(body.end.result).toEqual({ square: n * n, at: "done" });
      // From the success's recorded time (the settle's) to the route having the result.
      lagsMs.push(body.returnedAt - new Date(body.end.finishedAt).getTime());
    }
    await running;
    lagsMs.sort((x, y) => x - y);
    console.log(`waitForJob (${driver}): the route had the result ${lagsMs.join(", ")} ms after the success's recorded time`);
    expect(lagsMs[0]).toBeGreaterThanOrEqual(-5);
    expect(lagsMs[1]).toBeLessThan(50);
    const { rows } = await t.admin.query<{ awaited: boolean; result: unknown }>(`select awaited, result from "${t.schema}".jobs where name = 'square' order by id`);
    expect(rows).toEqual([1, 7, 8, 9].map((n) => ({ awaited: true, result: { square: n * n, at: "done" } })));
  });

  it("keeps a handler's return value with the job, and getJob shows it", async () => {
    const { id } = await enqueue(t, square, { n: 3 });
    await worker();
    expect((await getJob(t, id))?.result).toEqual({ square: 9, at: "done" });
    // Already ended: the wait answers at once.
    const end = await waitForJob(t, id, { timeoutMs: 1_000 });
    expect(end).toMatchObject({ status: "succeeded", result: { square: 9, at: "done" } });
  });

  it("a dead job's wait returns its reasons", async () => {
    const { id } = await enqueue(t, doomed, {});
    const clock = new ManualClock();
    const waiting = waitForJobOn(clock, t, id, { timeoutMs: 10_000 });
    await clock.timerSet(); // listening, so the end comes by its notification
    await worker();
    const end = await waiting;
    expect(end.status).toBe("dead");
    if (end.status !== "dead") return;
    expect(end.reasons).toHaveLength(2);
    expect(end.reasons.every((r) => r.startsWith("failed: Error: the card was declined"))).toBe(true);
  });

  it("a return value over the payload limit fails the job for good, saying why", async () => {
    const { id } = await enqueue(t, huge, {});
    await worker();
    const job = await getJob(t, id);
    expect(job?.status).toBe("dead");
    expect(job?.result).toBeNull();
    expect(job?.lastError).toMatch(/return value cannot be kept as the job's result: result: is 2002 bytes of JSON; at most 1000/);
  });

  it("a timeout is a clear error and leaves the job alone; a cancel ends the wait", async () => {
    const { id } = await enqueue(t, square, { n: 1 }, { delayMs: 60_000 });
    const before = await getJob(t, id);
    const clock = new ManualClock();
    const timingOut = waitForJobOn(clock, t, id, { timeoutMs: 100 }).catch((e: unknown) => e);
    await clock.timerSet();
    const dueIn = clock.dueIn();
    await clock.advance(100);
    const err = await timingOut;
    expect(dueIn).toBe(100); // the wait's only timer: its timeout, no sooner
    expect(err).toBeInstanceOf(WaitTimeoutError);
    expect((err as Error).message).toBe(`job ${id} did not end within 100ms (it is queued); the wait left it alone`);
    const after = await getJob(t, id);
    expect(after).toMatchObject({ status: "queued", attempts: 0, runAt: before!.runAt });

    const waiting = waitForJobOn(clock, t, id, { timeoutMs: 5_000 });
    await clock.timerSet();
    await cancelJob(t, id);
    expect(await waiting).toMatchObject({ id, status: "cancelled" });
  });

  it("a wait whose connection is terminated takes another, keeps its deadline, and still sees the end", async () => {
    const { id } = await enqueue(t, square, { n: 4 }, { delayMs: 60_000 });
    const clock = new ManualClock();
    const waiting = waitForJobOn(clock, t, id, { timeoutMs: 10_000 });
    await clock.timerSet();
    await clock.advance(1_000);
    // The waiter's backend: its last statement was the read of the job.
    const killed = await t.admin.query(
      `select pg_terminate_backend(pid) from pg_stat_activity where query like '%finished_at, last_error from%' and pid <> pg_backend_pid()`,
    );
    expect(killed.rowCount).toBe(1);
    // Lost: the timeout's timer is gone, a reconnect's backoff (at most 2 s) is set in its place.
    while (!(clock.pending() === 1 && clock.dueIn()! < 2_000)) await new Promise((r) => setImmediate(r));
    const backoff = clock.dueIn()!;
    expect(backoff).toBeLessThan(2_000);
    await clock.advance(backoff);
    // Listening again, on the deadline set when the wait began.
    await clock.timerSet();
    expect(clock.dueIn()).toBe(9_000 - backoff);
    await cancelJob(t, id);
    expect(await waiting).toMatchObject({ id, status: "cancelled" });
  });

  it("an abort stops the wait with its reason; a missing job is an error", async () => {
    const { id } = await enqueue(t, square, { n: 2 }, { delayMs: 60_000 });
    const controller = new AbortController();
    const clock = new ManualClock();
    const waiting = waitForJobOn(clock, t, id, { timeoutMs: 5_000, signal: controller.signal }).catch((e: unknown) => e);
    await clock.timerSet();
    controller.abort(new Error("client went away"));
    expect(((await waiting) as Error).message).toBe("client went away");
    await expect(waitForJob(t, "999999999", { timeoutMs: 100 })).rejects.toThrow("job 999999999 does not exist");
    await expect(waitForJob(t, "abc", { timeoutMs: 100 })).rejects.toThrow('"abc" is not a job id');
  });
});
