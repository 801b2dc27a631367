import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import type { Queryable } from "../shared/db/db.ts";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { getJob } from "../shared/observe/admin.ts";
import { rescueExpiredLeases } from "../shared/lifecycle/rescue.ts";
import { settleJobs } from "../shared/lifecycle/settle.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { runWorker, type WorkerLog, type WorkerOptions } from "../shared/runner/worker.ts";
import { nextTurn } from "../shared/runner/clock.ts";
import { START_MARK_AFTER_MS } from "../shared/runner/run-job.ts";
import type { Store } from "../shared/db/db.ts";
import { createTestDb, drivers, type TestDb } from "./support/db.ts";
import { ManualClock, runOn, watched } from "./support/clock.ts";

/** A handler's work of `ms` on the runner's clock. */
const work = (clock: ManualClock, ms: number) => new Promise<void>((r) => clock.after(ms, r));

describe.each(drivers)("the runner loop (%s driver)", (driver) => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb(driver, 6);
  });
  afterAll(() => t.drop());

  const statuses = async (queue: string) =>
    (
      await t.admin.query<{ status: string; n: number }>(
        `select status::text, count(*)::int as n from "${t.schema}".jobs where queue = $1 group by 1 order by 1`,
        [queue],
      )
    ).rows;
  /** The leases of a queue's running jobs end now, as if their runner had died a lease ago. */
  const expireLeases = (queue: string) =>
    t.admin.query(`update "${t.schema}".jobs set lease_expires_at = now() - interval '1 millisecond' where queue = $1 and status = 'running'`, [queue]);
  /**
   * The runner on `clock`, moved to its next timer each time it waits on
   * nothing else; the leases of `queue`'s running jobs move in step, so the
   * database's lease is the runner's: each jump brings them as much closer
   * to their end, less the real time the database saw pass since the last
   * (a loaded host's slow round trips are not counted twice).
   * `look` is called each time the clock moves, the runner waiting. A
   * handler's own queries go through a `watched` store given in, so that the
   * clock waits for them too.
   */
  const onClock = (clock: ManualClock, queue: string, options: Omit<WorkerOptions, "store" | "clock"> & { store?: Store }, look?: () => Promise<void>) => {
    const given = options.store ?? t;
    const store = "busy" in given ? (given as ReturnType<typeof watched<Store>>) : watched(given);
    let last = performance.now();
    return runOn(clock, store, runWorker({ ...options, store, clock }), async (ms) => {
      const now = performance.now();
      await t.admin.query(
        `update "${t.schema}".jobs set lease_expires_at = lease_expires_at - $2 * interval '1 millisecond' where queue = $1 and status = 'running'`,
        [queue, ms - (now - last)],
      );
      last = now;
      await look?.();
    });
  };
  const attemptsOf = async (queue: string) =>
    (
      await t.admin.query<any>(
        `select a.* from "${t.schema}".attempts a join "${t.schema}".jobs j on j.id = a.job_id where j.queue = $1 order by a.ended_at, a.attempt`,
        [queue],
      )
    ).rows;

  it("runs every job exactly once, 20 at a time, and settles in batches", async () => {
    const runs = new Map<number, number>();
    let concurrent = 0;
    let peak = 0;
    const counted = defineJob({
      name: "counted",
      schema: z.object({ n: z.number() }),
      queue: "drain",
      handler: async ({ n }) => {
        peak = Math.max(peak, ++concurrent);
        runs.set(n, (runs.get(n) ?? 0) + 1);
        await nextTurn();
        concurrent--;
      },
    });
    await enqueueJobs(t, Array.from({ length: 1_000 }, (_, n) => job(counted, { n })));
    let queries = 0;
    const counting: Queryable = { query: (text, values) => (queries++, t.db.query(text, values)) };
    const store = { db: counting, schema: t.schema };
    const summary = await runWorker({ linger: "fixed", store, registry: createRegistry([counted]), queues: ["drain"], runnerId: "w1", slots: 20, idleMs: 100 });
    expect(summary).toMatchObject({ claimed: 1_000, succeeded: 1_000, failed: 0, stale: 0 });
    expect(runs.size).toBe(1_000);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(peak).toBeLessThanOrEqual(20);
    expect(peak).toBeGreaterThan(1);
    expect(queries).toBeLessThan(500); // 1,000 jobs: batched claims and settles, not 2,000 round trips
    expect(await statuses("drain")).toEqual([{ status: "succeeded", n: 1_000 }]);
    const attempts = await attemptsOf("drain");
    expect(attempts).toHaveLength(1_000);
    expect(attempts.every((a) => a.outcome === "succeeded" && a.runner_id === "w1" && a.attempt === 1)).toBe(true);
  });

  it("records a thrown error as failed with message and stack, retries, then dead", async () => {
    let starts = 0;
    const failing = defineJob({
      name: "failing",
      schema: z.object({}),
      queue: "fail",
      backoffMs: 0,
      handler: () => {
        starts++;
        throw new Error(`broken ${starts}`);
      },
    });
    const { id } = await enqueue(t, failing, {});
    const log: string[] = [];
    const logger: WorkerLog = { info: (m) => log.push(m), warn: (m) => log.push(m), error: (m) => log.push(m) };
    const summary = await runWorker({ linger: "fixed", store: t, registry: createRegistry([failing]), queues: ["fail"], runnerId: "w", slots: 2, idleMs: 300, pollMs: 20, log: logger });
    expect(starts).toBe(3);
    expect(summary).toMatchObject({ claimed: 3, failed: 3, succeeded: 0 });
    const attempts = await attemptsOf("fail");
    expect(attempts.map((a) => a.outcome)).toEqual(["failed", "failed", "failed"]);
    expect(attempts[0]!.error).toMatch(/^Error: broken 1\n\s+at /);
    const { rows } = await t.admin.query(`select status::text, last_error from "${t.schema}".jobs where id = $1`, [id]);
    expect(rows[0]!.status).toBe("dead");
    expect(log).toContain("job failed");
  });

  it("tells a handler its charged attempt and its run: the run is the attempt row's number, a run given back is not charged", async () => {
    const seen: [number, number][] = [];
    const numbered = defineJob({
      name: "numbered", schema: z.object({}), queue: "numbered", leaseMs: 5_000, backoffMs: 0,
      handler: (_, ctx) => {
        seen.push([ctx.attempt, ctx.run]);
        if (ctx.run === 2) throw new Error("fails its second run");
      },
    });
    const { id } = await enqueue(t, numbered, {});
    // A runner that dies before recording the start: the rescue gives the attempt back.
    await claimJobs(t, { queue: "numbered", runnerId: "gone", limit: 1, maxLeaseMs: 60_000 });
    // Its lease runs out (moved, not waited for: a lease long enough that a loaded host settles every later run in time).
    await expireLeases("numbered");
    expect(await rescueExpiredLeases(t)).toMatchObject({ refunded: 1 });
    // A long idle: the retry of run 2 is claimed by this same runner however loaded the machine.
    await runWorker({ linger: "fixed", store: t, registry: createRegistry([numbered]), queues: ["numbered"], runnerId: "w", slots: 1, idleMs: 3_000 });
    // Run 2 is charged as attempt 1 (with the owed one: 2 charged after it), run 3 as attempt 3.
    expect(seen).toEqual([[1, 2], [3, 3]]);
    expect((await attemptsOf("numbered")).map((a) => [a.attempt, a.outcome])).toEqual([[1, "released"], [2, "failed"], [3, "succeeded"]]);
    expect((await getJob(t, id))!.attemptHistory.map((a) => a.run)).toEqual([1, 2, 3]);
  });

  it("aborts a handler at its lease deadline and records timeout, never a late success", async () => {
    let aborted = 0;
    let late = 0;
    const clock = new ManualClock(Date.now());
    const stubborn = defineJob({
      name: "stubborn",
      schema: z.object({ ignoreSignal: z.boolean() }),
      queue: "timeout",
      leaseMs: 1_000,
      backoffMs: 0,
      maxAttempts: 2,
      handler: async ({ ignoreSignal }, ctx) => {
        ctx.signal.addEventListener("abort", () => aborted++);
        // Runs past its lease; one of them does not even listen.
        await work(clock, ignoreSignal ? 1_100 : 10_000);
        late++;
      },
    });
    await enqueue(t, stubborn, { ignoreSignal: true });
    const summary = await onClock(clock, "timeout", { linger: "fixed", registry: createRegistry([stubborn]), queues: ["timeout"], runnerId: "w", slots: 2, idleMs: 600, pollMs: 20 });
    await clock.advance(1_100); // let the ignored handlers finish late
    expect(late).toBe(2);
    expect(aborted).toBe(2);
    expect(summary).toMatchObject({ timedOut: 2, succeeded: 0 });
    expect((await attemptsOf("timeout")).map((a) => a.outcome)).toEqual(["timeout", "timeout"]);
    expect(await statuses("timeout")).toEqual([{ status: "dead", n: 1 }]);
  });

  it("records a start once the handler has run START_MARK_AFTER_MS, and none for a job that ends sooner", async () => {
    const clock = new ManualClock(Date.now());
    const timed = defineJob({ name: "timed", schema: z.object({ ms: z.number() }), queue: "marks", handler: ({ ms }) => work(clock, ms) });
    const quick = await enqueue(t, timed, { ms: START_MARK_AFTER_MS - 10 });
    const slow = await enqueue(t, timed, { ms: START_MARK_AFTER_MS * 4 });
    const texts: string[] = [];
    const counting: Queryable = { query: (text, values) => (texts.push(text), t.db.query(text, values)) };
    // Whether each job's start was on record while it ran, read each time the clock moves.
    const seen = new Map<string, boolean>();
    const summary = await onClock(clock, "marks", {
      store: { db: counting, schema: t.schema }, linger: "fixed", registry: createRegistry([timed]), queues: ["marks"], runnerId: "w", slots: 2, idleMs: 600, pollMs: 20,
    }, async () => {
      const { rows } = await t.admin.query<{ id: string; handler_started: boolean }>(
        `select id::text, handler_started from "${t.schema}".jobs where queue = 'marks' and status = 'running'`);
      for (const r of rows) seen.set(r.id, (seen.get(r.id) ?? false) || r.handler_started);
    });
    expect(summary).toMatchObject({ succeeded: 2 });
    expect(Object.fromEntries(seen)).toEqual({ [quick.id]: false, [slow.id]: true });
    // One start mark written in all, the slow job's, while it ran.
    expect(texts.filter((q) => q.includes("handler_started = true"))).toHaveLength(1);
  });

  it("picks up a follow-up job in the same runner without waiting for a poll", async () => {
    const stamps: number[] = [];
    const step: ReturnType<typeof defineJob<z.ZodObject<{ i: z.ZodNumber }>>> = defineJob({
      name: "step",
      schema: z.object({ i: z.number() }),
      queue: "chain",
      handler: async ({ i }, ctx) => {
        stamps.push(Date.now());
        if (i < 20) await ctx.enqueue(step, { i: i + 1 });
      },
    });
    await enqueue(t, step, { i: 1 });
    let claims = 0;
    const counting: Queryable = {
      query: (text, values) => ((claims += text.includes("skip locked") ? 1 : 0), t.db.query(text, values)),
    };
    // A 5 s poll: only a wake-up or a hand-off can make the chain quick.
    const summary = await runWorker({ linger: "fixed", store: { db: counting, schema: t.schema }, registry: createRegistry([step]), queues: ["chain"], runnerId: "chain-runner", slots: 4, idleMs: 200, pollMs: 5_000 });
    expect(summary.succeeded).toBe(20);
    // The queue is drained after the first step: each follow-up is handed to
    // this runner already claimed, with no claim round trip of its own.
    expect(claims).toBeLessThan(5);
    const { rows: counted } = await t.admin.query<{ attempts: number; n: number }>(
      `select attempts, count(*)::int as n from "${t.schema}".jobs where queue = 'chain' group by 1`);
    expect(counted).toEqual([{ attempts: 1, n: 20 }]);
    const hops = stamps.slice(1).map((s, i) => s - stamps[i]!);
    expect(Math.max(...hops)).toBeLessThan(1_000);
    const attempts = await attemptsOf("chain");
    expect(new Set(attempts.map((a) => a.runner_id))).toEqual(new Set(["chain-runner"]));
  });

  it("does not size its prefetch by a first claim that had to open the connection", async () => {
    const clock = new ManualClock();
    const quick = defineJob({ name: "quick", schema: z.object({}), queue: "first-claim", handler: () => work(clock, 2) });
    await enqueueJobs(t, Array.from({ length: 300 }, () => job(quick, {})));
    // The first statement takes 300 ms, as a handshake through a slow relay would; every claim's batch size is kept.
    let first = true;
    const asked: number[] = [];
    const counted = watched(t);
    const store = {
      ...counted,
      db: {
        query: async (text: string, values?: unknown[]) => {
          if (first) (first = false), await new Promise<void>((r) => clock.after(300, r));
          if (text.includes("skip locked")) asked.push(Number(values![1]));
          return counted.db.query(text, values);
        },
      } as Queryable,
    };
    const summary = await onClock(clock, "first-claim", { store, registry: createRegistry([quick]), queues: ["first-claim"], runnerId: "first-claim", slots: 10, idleMs: 100, linger: "fixed" });
    expect(summary.succeeded).toBe(300);
    // 10 slots of 2 ms jobs finish 250 in the 50 ms hold; timed by the 300 ms first claim, the
    // prefetch would be what they finish in two of those: the cap, 1,000.
    expect(Math.max(...asked)).toBeLessThanOrEqual(10 + 250);
  });

  it("hands off the follow-ups of handlers that ask together in one statement, each claimed once, in order", async () => {
    const CHAINS = 10;
    const STEPS = 5;
    // Each step of every chain waits for that step of all the others: their follow-ups are asked for at once.
    const arrived = new Map<number, number>();
    const together = new Map<number, () => void>();
    const allThere = new Map(Array.from({ length: STEPS }, (_, i) => [i + 1, new Promise<void>((r) => together.set(i + 1, r))]));
    const ran: string[] = [];
    // The id each ctx.enqueue answered, and the id each job ran as: the same, job by job, if each caller got its own.
    const answered = new Map<string, string>();
    const ranAs = new Map<string, string>();
    const link: ReturnType<typeof defineJob<z.ZodObject<{ chain: z.ZodNumber; i: z.ZodNumber }>>> = defineJob({
      name: "link", schema: z.object({ chain: z.number(), i: z.number() }), queue: "links", maxAttempts: 1,
      handler: async ({ chain, i }, ctx) => {
        ran.push(`${chain}/${i}`);
        ranAs.set(`${chain}/${i}`, ctx.jobId);
        arrived.set(i, (arrived.get(i) ?? 0) + 1);
        if (arrived.get(i) === CHAINS) together.get(i)!();
        await allThere.get(i);
        if (i < STEPS) answered.set(`${chain}/${i + 1}`, (await ctx.enqueue(link, { chain, i: i + 1 })).id);
      },
    });
    await enqueueJobs(t, Array.from({ length: CHAINS }, (_, chain) => job(link, { chain, i: 1 })));
    const claimedInserts: number[] = [];
    const counting: Queryable = {
      query: (text, values) => {
        if (/^\s*insert into \S*jobs[\s\S]*'running', 1, 1/.test(text)) claimedInserts.push((values![0] as string).split(",").length);
        return t.db.query(text, values);
      },
    };
    const summary = await runWorker({
      linger: "fixed", store: { db: counting, schema: t.schema }, registry: createRegistry([link]), queues: ["links"], runnerId: "links-runner",
      // A prefetch: the first claim asks for more than the ten queued, so it finds the queue drained.
      slots: CHAINS, prefetch: 5, idleMs: 200, pollMs: 1_000,
    });
    expect(summary.succeeded).toBe(CHAINS * STEPS);
    // Every follow-up was handed off (the poll is 5 s), and each step's ten went in two statements, not ten: the first
    // at once, the nine asked for while it was on its way together.
    const handedOff = claimedInserts.reduce((a, b) => a + b, 0);
    expect(handedOff).toBe(CHAINS * (STEPS - 1));
    expect(claimedInserts.length).toBeLessThanOrEqual(2 * (STEPS - 1));
    const { rows } = await t.admin.query<{ payload: { chain: number; i: number }; attempts: number; runner_id: string }>(
      `select payload, attempts, runner_id from "${t.schema}".jobs where queue = 'links' order by id`);
    expect(rows).toHaveLength(CHAINS * STEPS);
    expect(rows.every((r) => r.attempts === 1 && r.runner_id === "links-runner")).toBe(true);
    // Each job carries the payload its own handler asked for: chain by chain, the steps in order, none twice.
    for (let chain = 0; chain < CHAINS; chain++) {
      expect(ran.filter((r) => r.startsWith(`${chain}/`))).toEqual(Array.from({ length: STEPS }, (_, i) => `${chain}/${i + 1}`));
    }
    expect(new Set(rows.map((r) => `${r.payload.chain}/${r.payload.i}`)).size).toBe(CHAINS * STEPS);
    expect(answered.size).toBe(CHAINS * (STEPS - 1));
    for (const [key, id] of answered) expect(ranAs.get(key), key).toBe(id);
  });

  it("holds a handler's follow-ups to the deployment's serving rules: a queue no runner serves is refused and nothing is written", async () => {
    const stray = defineJob({ name: "stray", schema: z.object({}), queue: "nowhere", handler: () => {} });
    const sender = defineJob({
      name: "sender", schema: z.object({}), queue: "sending", maxAttempts: 1,
      handler: async (_p, ctx) => void (await ctx.enqueue(stray, {})),
    });
    const { id } = await enqueue(t, sender, {});
    const serving = new Map([["sending", 60_000]]);
    const summary = await runWorker({
      linger: "fixed",
      store: t, registry: createRegistry([sender, stray]), queues: ["sending"], runnerId: "w", slots: 1, idleMs: 100, pollMs: 20,
      limits: { serving },
    });
    expect(summary).toMatchObject({ succeeded: 0, failed: 1 });
    const { rows } = await t.admin.query(`select status::text, last_error from "${t.schema}".jobs where id = $1`, [id]);
    expect(rows[0]).toMatchObject({ status: "dead", last_error: expect.stringMatching(/^ValidationError: .*no runner serves queue "nowhere"/) });
    expect(await statuses("nowhere")).toEqual([]);
  });

  it("keeps running when follow-ups are enqueued while every slot and the buffer are full", async () => {
    const clock = new ManualClock(Date.now());
    const child = defineJob({ name: "fanout-child", schema: z.object({}), queue: "fanout", handler: () => work(clock, 5) });
    const parent = defineJob({
      name: "fanout-parent",
      schema: z.object({ n: z.number() }),
      queue: "fanout",
      handler: async (_p, ctx) => {
        await work(clock, 20);
        await ctx.enqueue(child, {});
      },
    });
    await enqueueJobs(t, Array.from({ length: 12 }, (_, n) => job(parent, { n })));
    // A loop spinning without awaiting would block every timer, so the
    // watchdog counts loop turns instead: past a million it stops the runner.
    let turns = 0;
    const outcome = await onClock(clock, "fanout", {
      linger: "fixed",
      registry: createRegistry([parent, child]), queues: ["fanout"], runnerId: "w", slots: 2, prefetch: 2,
      idleMs: 200, pollMs: 20, remainingMs: () => (++turns > 1_000_000 ? 0 : Number.POSITIVE_INFINITY),
    });
    expect(turns).toBeLessThan(10_000);
    expect(outcome).toMatchObject({ succeeded: 24, stale: 0 });
    expect(await statuses("fanout")).toEqual([{ status: "succeeded", n: 24 }]);
  });

  it("runs a job whose runner died holding it alone, with nothing beside it", async () => {
    let running = 0;
    let besideSuspect = -1;
    const clock = new ManualClock(Date.now());
    const isoWork = defineJob({
      name: "iso-work", schema: z.object({ suspect: z.boolean() }), queue: "iso", leaseMs: 5_000, backoffMs: 0, maxAttempts: 2,
      handler: async ({ suspect }) => {
        running++;
        if (suspect) besideSuspect = running - 1;
        await work(clock, 80);
        if (suspect) besideSuspect = Math.max(besideSuspect, running - 1);
        running--;
      },
    });
    const { id } = await enqueue(t, isoWork, { suspect: true });
    // Its first runner dies: the lease runs out, and with one attempt left the
    // rescuer marks it a suspect.
    const [held] = await claimJobs(t, { queue: "iso", runnerId: "dead-runner", limit: 1, maxLeaseMs: 60_000 });
    await settleJobs(t, { started: [held!] });
    await expireLeases("iso");
    expect((await rescueExpiredLeases(t)).rescued).toBe(1);
    await enqueueJobs(t, Array.from({ length: 8 }, () => job(isoWork, { suspect: false })));
    const summary = await onClock(clock, "iso", { linger: "fixed", registry: createRegistry([isoWork]), queues: ["iso"], runnerId: "w", slots: 4, idleMs: 300, pollMs: 20 });
    expect(summary.succeeded).toBe(9);
    expect(besideSuspect).toBe(0);
    const { rows } = await t.admin.query(`select suspect, status::text from "${t.schema}".jobs where id = $1`, [id]);
    expect(rows[0]).toEqual({ suspect: false, status: "succeeded" });
  });

  it("learns from its claims that a suspect waits, with no query of its own, and still runs it alone", async () => {
    const events: string[] = [];
    let running = 0;
    let besideSuspect = -1;
    const clock = new ManualClock(Date.now());
    const toldWork = defineJob({
      name: "told-work", schema: z.object({ suspect: z.boolean() }), queue: "told", leaseMs: 1_000, backoffMs: 0, maxAttempts: 2,
      handler: async ({ suspect }) => {
        running++;
        if (suspect) {
          events.push("suspect started");
          besideSuspect = running - 1;
        }
        await work(clock, 20);
        running--;
      },
    });
    const { id } = await enqueue(t, toldWork, { suspect: true });
    await t.admin.query(`update "${t.schema}".jobs set suspect = true, attempts = 1 where id = $1`, [id]);
    await enqueueJobs(t, Array.from({ length: 30 }, () => job(toldWork, { suspect: false })));
    const watching: Queryable = {
      query: (text: string, values?: unknown[]) => {
        if (/^\s*select exists/.test(text)) events.push("looked for suspects");
        return t.db.query(text, values);
      },
    } as Queryable;
    const summary = await onClock(clock, "told", {
      linger: "fixed",
      store: { db: watching, schema: t.schema }, registry: createRegistry([toldWork]), queues: ["told"], runnerId: "w", slots: 4, idleMs: 200, pollMs: 20,
    });
    expect(summary.succeeded).toBe(31);
    expect(besideSuspect).toBe(0);
    // Its first claim brought ordinary jobs and the news; the suspect ran
    // before the runner ever asked on its own.
    expect(events[0]).toBe("suspect started");
  });

  it("claims nothing whose lease its remaining time cannot cover, and exits", async () => {
    const long = defineJob({ name: "long-lease", schema: z.object({}), queue: "tight", leaseMs: 30_000, handler: () => {} });
    await enqueue(t, long, {});
    const deadline = Date.now() + 10_000;
    const summary = await runWorker({
      linger: "fixed",
      store: t, registry: createRegistry([long]), queues: ["tight"], runnerId: "w", slots: 1,
      remainingMs: () => deadline - Date.now(), idleMs: 100, pollMs: 20,
    });
    expect(summary.claimed).toBe(0);
    expect(await statuses("tight")).toEqual([{ status: "queued", n: 1 }]);
  });

  it("gives back claimed jobs it cannot start in time, without charging them", async () => {
    const clock = new ManualClock(Date.now());
    const slow = defineJob({ name: "slow", schema: z.object({}), queue: "release", leaseMs: 1_000, handler: () => work(clock, 400) });
    await enqueueJobs(t, Array.from({ length: 10 }, () => job(slow, {})));
    const deadline = clock.now() + 1_500;
    const summary = await onClock(clock, "release", {
      linger: "fixed",
      registry: createRegistry([slow]), queues: ["release"], runnerId: "w", slots: 1, prefetch: 9,
      remainingMs: () => deadline - clock.now(), idleMs: 100, pollMs: 20,
    });
    expect(summary.succeeded).toBeGreaterThanOrEqual(1);
    expect(summary.released).toBeGreaterThanOrEqual(1);
    expect(summary.succeeded + summary.released).toBe(10);
    const { rows } = await t.admin.query<{ status: string; attempts: number; n: number }>(
      `select status::text, attempts, count(*)::int as n from "${t.schema}".jobs where queue = 'release' group by 1, 2 order by 1`,
    );
    expect(rows).toEqual([
      { status: "queued", attempts: 0, n: summary.released },
      { status: "succeeded", attempts: 1, n: summary.succeeded },
    ]);
    const released = (await attemptsOf("release")).filter((a) => a.outcome === "released");
    expect(released).toHaveLength(summary.released);
  });

  it("renews the lease of a job that waited in its buffer past the settle margin, so its handler gets the whole lease", async () => {
    // Lease 1 s, margin 250 ms; one slot and 400 ms handlers: the second and
    // third jobs wait in the buffer past their margin (the third until 160 ms
    // before its first lease ends).
    const leftAtStart: number[] = [];
    const clock = new ManualClock(Date.now());
    const store = watched(t);
    const waited = defineJob({
      name: "waited", schema: z.object({}), queue: "renew", leaseMs: 1_000,
      handler: async (_p, ctx) => {
        const { rows } = await store.db.query<{ ms: number }>(
          `select extract(epoch from lease_expires_at - now()) * 1000 as ms from "${t.schema}".jobs where id = $1`, [ctx.jobId]);
        leftAtStart.push(Number(rows[0]!.ms));
        await work(clock, 400);
      },
    });
    await enqueueJobs(t, Array.from({ length: 3 }, () => job(waited, {})));
    const summary = await onClock(clock, "renew", {
      linger: "fixed",
      store, registry: createRegistry([waited]), queues: ["renew"], runnerId: "w", slots: 1, prefetch: 2, idleMs: 100, pollMs: 20,
    });
    expect(summary).toMatchObject({ claimed: 3, succeeded: 3, released: 0, stale: 0 });
    expect(leftAtStart).toHaveLength(3);
    expect(Math.min(...leftAtStart)).toBeGreaterThan(700);
    expect(await statuses("renew")).toEqual([{ status: "succeeded", n: 3 }]);
  });

  it("holds no more slow jobs than it has slots, leaving the rest for other runners", async () => {
    const clock = new ManualClock(Date.now());
    const slow = defineJob({ name: "slow-hold", schema: z.object({}), queue: "hold", handler: () => work(clock, 150) });
    await enqueueJobs(t, Array.from({ length: 10 }, () => job(slow, {})));
    let held = 0;
    // Sampled each time the runner waits on its clock: between its claims and settles, not in the middle of one.
    const sample = async () => {
      const { rows } = await t.admin.query<{ n: number }>(
        `select count(*)::int as n from "${t.schema}".jobs where queue = 'hold' and status = 'running'`);
      held = Math.max(held, rows[0]!.n);
    };
    const summary = await onClock(clock, "hold", { linger: "fixed", registry: createRegistry([slow]), queues: ["hold"], runnerId: "w", slots: 2, idleMs: 100, pollMs: 20 }, sample);
    expect(summary.succeeded).toBe(10);
    // Two running, and at most two more finished but not yet settled; a
    // runner claiming ahead would hold six or more here.
    expect(held).toBeGreaterThanOrEqual(2);
    expect(held).toBeLessThanOrEqual(4);
  });

  it("exits after its idle period when there is nothing to claim", async () => {
    const clock = new ManualClock(Date.now());
    const started = clock.now();
    const summary = await onClock(clock, "empty", { linger: "fixed", registry: createRegistry([]), queues: ["empty"], runnerId: "w", slots: 4, idleMs: 300, pollMs: 50 });
    expect(summary.claimed).toBe(0);
    const took = clock.now() - started;
    expect(took).toBeGreaterThanOrEqual(300);
    expect(took).toBeLessThan(5_000);
  });
});
