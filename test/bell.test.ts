import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { enqueue, enqueueJobs, enqueueFollowUp, job } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { JOB_READY_CHANNEL } from "../shared/lifecycle/enqueue-sql.ts";
import { runWorker, type WorkerLog } from "../shared/runner/worker.ts";
import { ManualClock } from "./support/clock.ts";
import { createTestDb, databaseUrl, driveOnClock, drivers, watchedStore, type TestDb } from "./support/db.ts";

/**
 * The bell (shared/runner/bell.ts, migration 0016): a runner waiting for
 * work is told of an enqueue instead of finding it at its next poll. The
 * runners here run on a ManualClock that the tests hold still, so a poll
 * never comes unless a test moves the clock: a job that starts anyway was
 * rung for.
 */

/** Loops on events (queries, turns of the event loop), never on a timer, until `ok`. */
async function until(ok: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await ok())) await new Promise((r) => setImmediate(r));
}

function logged(): WorkerLog & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, info() {}, warn: (m) => void warnings.push(m), error: (m) => void warnings.push(m) };
}

describe.each(drivers)("the bell (%s driver)", (driver) => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb(driver, 3);
  });
  afterAll(() => t.drop());

  let started: () => void = () => {};
  const rung = defineJob({ name: "bell.job", queue: "bell", schema: z.object({}), handler: () => started() });
  const registry = createRegistry([rung]);
  const listeners = async () =>
    (await t.admin.query<{ runner_id: string; queues: string[] }>(`select runner_id, queues from "${t.schema}".listeners where expires_at > now()`)).rows;

  /**
   * A runner with room and nothing to do, waiting on a clock that does not
   * move: listening, and paused. `finish` moves the clock from rest to rest
   * until the runner leaves (its linger, 10 s).
   */
  async function waitingRunner(runnerId: string, log = logged()) {
    const clock = new ManualClock(Date.now());
    const { store, atRest } = watchedStore(t, { connect: true });
    const running = runWorker({
      store, clock, registry, queues: ["bell"], runnerId, slots: 2, prefetch: 0, linger: "fixed", idleMs: 10_000, pollMs: 1_000, bell: true, log,
    });
    // Paused: its poll and the listener row's renewal are the clock's two timers.
    await until(async () => clock.pending() === 2 && (await listeners()).some((l) => l.runner_id === runnerId));
    return { clock, log, atRest, finish: () => driveOnClock(clock, atRest, running) };
  }

  it("a job enqueued for a waiting runner starts without its poll, and the runner leaves no listener behind", async () => {
    const { finish } = await waitingRunner(`ring-${driver}`);
    expect(await listeners()).toEqual([{ runner_id: `ring-${driver}`, queues: ["bell"] }]);
    const ran = new Promise<void>((resolve) => (started = resolve));
    await enqueue(t, rung, {});
    // The clock has not moved: no poll came, only the notification.
    await ran;
    expect(await finish()).toMatchObject({ succeeded: 1, exit: "idle" });
    expect(await listeners()).toEqual([]);
  });

  it("found work disarms it (no row, so enqueues ring no one), and an empty claim a quiet spell later arms it again", async () => {
    const { Bell } = await import("../shared/runner/bell.ts");
    let rings = 0;
    const clock = new ManualClock();
    const bell = new Bell({ store: t, clock, queues: ["bell"], runnerId: `arm-${driver}`, quietMs: 1_000, onRing: () => rings++, log: logged() });
    expect(await bell.listen()).toBe(true);
    expect(await listeners()).toEqual([{ runner_id: `arm-${driver}`, queues: ["bell"] }]);
    await enqueue(t, rung, {});
    await until(() => rings === 1);
    bell.found();
    await until(async () => (await listeners()).length === 0);
    expect(bell.listening).toBe(true);
    // Work was found less than a poll ago: the polls find a stream's jobs.
    expect(await bell.listen()).toBe(false);
    await clock.advance(1_000);
    expect(await bell.listen()).toBe(true);
    expect(await bell.listen()).toBe(false);
    await enqueue(t, rung, {});
    await until(() => rings === 2);
    await bell.quiet();
    expect(await listeners()).toEqual([]);
    await t.admin.query(`delete from "${t.schema}".jobs`);
  });

  it("a cut listening connection leaves the runner polling, then listening again", async () => {
    const log = logged();
    const { clock, atRest, finish } = await waitingRunner(`cut-${driver}`, log);
    const killed = await t.admin.query(
      // The bell's connection: its last statement wrote the listener row (an enqueue's also names the table).
      `select pg_terminate_backend(pid) from pg_stat_activity
       where query like '%listeners (runner_id, queues, expires_at)%' and query not like '%pg_stat_activity%' and pid <> pg_backend_pid()`,
    );
    expect(killed.rowCount).toBe(1);
    await until(() => log.warnings.includes("not listening for new jobs; polling"));
    const ran = new Promise<void>((resolve) => (started = resolve));
    await enqueue(t, rung, {});
    // No bell now: the poll finds it.
    await clock.advance(1_000);
    await ran;
    // After the retry wait (5 s), it listens again.
    for (let waited = 0; waited < 5_000; waited += 1_000) {
      await atRest();
      await clock.advance(1_000);
    }
    await until(async () => (await listeners()).some((l) => l.runner_id === `cut-${driver}`));
    expect(await finish()).toMatchObject({ succeeded: 1, exit: "idle" });
    expect(await listeners()).toEqual([]);
  });
});

describe("what an enqueue rings", () => {
  let t: TestDb;
  let listener: pg.Client;
  const heard: string[] = [];
  beforeAll(async () => {
    t = await createTestDb("pg", 2);
    listener = new pg.Client({ connectionString: databaseUrl() });
    await listener.connect();
    listener.on("notification", (n) => n.channel === JOB_READY_CHANNEL && heard.push(n.payload!));
    await listener.query(`listen ${JOB_READY_CHANNEL}`);
  });
  afterAll(async () => {
    await listener.end();
    await t.drop();
  });

  const on = (queue: string) => defineJob({ name: `ring.${queue}`, queue, schema: z.object({}), handler: () => {} });
  const [a, b] = [on("a"), on("b")];
  const listen = (runnerId: string, queues: string[], expiresInMs: number) =>
    t.admin.query(
      `insert into "${t.schema}".listeners (runner_id, queues, expires_at) values ($1, $2, now() + $3 * interval '1 millisecond')
       on conflict (runner_id) do update set queues = excluded.queues, expires_at = excluded.expires_at`,
      [runnerId, queues, expiresInMs],
    );
  /** What was heard up to a marker enqueue's own notification (one listener's notifications come in commit order). */
  async function heardBefore(marker: () => Promise<unknown>): Promise<string[]> {
    heard.length = 0;
    await marker();
    const expected = `"${t.schema}".marker`;
    await until(() => heard.includes(expected));
    return heard.slice(0, heard.indexOf(expected));
  }
  const marker = on("marker");

  it("notifies each queue with a job due now that a live listener names, once per statement", async () => {
    await listen("r1", ["a", "marker"], 60_000);
    const got = await heardBefore(async () => {
      await enqueue(t, b, {}); // nobody listens on b
      await enqueue(t, a, {}, { delayMs: 60_000 }); // not due
      await enqueueJobs(t, [job(a, {}), job(a, {}), job(b, {})]); // one for a
      await enqueueJobs(t, [job(a, {}, { dedupeKey: "k1" }), job(a, {}, { dedupeKey: "k2" })]);
      await enqueueJobs(t, [job(a, {}, { dedupeKey: "k1" })]); // pending key: nothing inserted
      await enqueueFollowUp(t, job(a, {}), "someone", { names: ["ring.a"], maxLeaseMs: 60_000 }); // a waits ahead: queued
      await enqueue(t, marker, {});
    });
    expect(got).toEqual([`"${t.schema}".a`, `"${t.schema}".a`, `"${t.schema}".a`]);
  });

  it("rings nothing once the listener row has expired", async () => {
    await listen("r1", ["a"], -1);
    await listen("r2", ["marker"], 60_000);
    expect(await heardBefore(async () => {
      await enqueue(t, a, {});
      await enqueue(t, marker, {});
    })).toEqual([]);
  });
});

describe("the bell's states, on a stand-in pool", () => {
  /** A client whose every statement waits for the test to let it through (the latest first). */
  function standIn() {
    const sent: string[] = [];
    const gates: (() => void)[] = [];
    let released: unknown = "no";
    const client = {
      query: (text: string) => (sent.push(text.trim().split(/\s+/).slice(0, 2).join(" ")), new Promise<{ rows: never[] }>((r) => gates.push(() => r({ rows: [] })))),
      on() {},
      off() {},
      release: (err?: unknown) => void (released = err),
    };
    return { sent, pass: () => gates.pop()?.(), released: () => released, pool: { connect: async () => client } };
  }
  const options = (pool: object, clock = new ManualClock()) =>
    ({ store: { db: pool as never, schema: "leasehold" }, clock, queues: ["q"], runnerId: "r", onRing() {}, log: logged() });

  it("told to stop while it opens, it closes once open, and neither call waits on the other", async () => {
    const { Bell } = await import("../shared/runner/bell.ts");
    const s = standIn();
    const bell = new Bell(options(s.pool));
    const listened = bell.listen();
    await until(() => s.sent.length === 1);
    const quieted = bell.quiet();
    while (s.sent.length < 4) {
      s.pass();
      await new Promise((r) => setImmediate(r));
    }
    s.pass();
    expect(await listened).toBe(false);
    await quieted;
    expect(s.sent).toEqual(["listen leasehold_job_ready", "with gone", "delete from", "unlisten leasehold_job_ready"]);
    expect(s.released()).toBeUndefined();
    expect(bell.listening).toBe(false);
  });

  it("a statement that never answers is given up after its timeout, the connection destroyed, and no retry before the wait", async () => {
    const { Bell } = await import("../shared/runner/bell.ts");
    const s = standIn();
    const clock = new ManualClock();
    const o = options(s.pool, clock);
    const bell = new Bell({ ...o, timeoutMs: 1_000, retryMs: 5_000 });
    const listened = bell.listen();
    await until(() => s.sent.length === 1);
    await clock.advance(1_000);
    expect(await listened).toBe(false);
    expect(s.released()).toBeInstanceOf(Error);
    expect(o.log.warnings).toEqual(["not listening for new jobs; polling"]);
    expect(await bell.listen()).toBe(false);
    expect(s.sent).toHaveLength(1);
    await clock.advance(5_000);
    const again = bell.listen();
    await until(() => s.sent.length === 2);
    s.pass();
    await until(() => s.sent.length === 3);
    s.pass();
    expect(await again).toBe(true);
  });
});
