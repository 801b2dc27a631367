import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { getJob } from "../shared/observe/admin.ts";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob, type JobContext } from "../shared/jobs/job.ts";
import { planWake } from "../shared/scheduler/wake-plan.ts";
import { nextDue } from "../shared/scheduler/due.ts";
import type { Clock } from "../shared/runner/clock.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { settleJobs } from "../shared/lifecycle/settle.ts";
import type { Queryable } from "../shared/db/db.ts";
import { Completer, type SettleReport } from "../shared/runner/completer.ts";
import { systemClock } from "../shared/runner/clock.ts";
import { createTestDb, drivers, type TestDb } from "./support/db.ts";
import { laterClock, ManualClock, runOn, watched } from "./support/clock.ts";


describe.each(drivers)("durable steps and sleeps (%s driver)", (driver) => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb(driver, 6);
  });
  afterAll(() => t.drop());

  const worker = (types: Parameters<typeof createRegistry>[0], options: { clock?: Clock; idleMs?: number } = {}) =>
    runWorker({ linger: "fixed", store: t, registry: createRegistry(types), queues: ["steps"], runnerId: `w-${driver}`, slots: 2, pollMs: 20, idleMs: 200, ...options });
  /** The runner on a ManualClock, moved to each of its timers once it waits on nothing else. */
  const onClock = (clock: ManualClock, types: Parameters<typeof createRegistry>[0]) => {
    const store = watched(t);
    return runOn(clock, store, runWorker({ linger: "fixed", store, clock, registry: createRegistry(types), queues: ["steps"], runnerId: `w-${driver}`, slots: 2, pollMs: 20, idleMs: 200 }));
  };
  const stepRows = async (id: string) =>
    (await t.admin.query<{ seq: number; name: string; attempt: number; result: unknown }>(
      `select seq, name, attempt, result from "${t.schema}".job_steps where job_id = $1 order by seq`, [id],
    )).rows;

  it("a retry replays the completed steps from the record and runs only the one that failed", async () => {
    const ran: string[] = [];
    let failOnce = true;
    const order = defineJob({
      name: "order", queue: "steps", backoffMs: 0, schema: z.object({ amount: z.number() }),
      handler: async ({ amount }, ctx) => {
        const charge = await ctx.step("charge", () => (ran.push("charge"), { chargeId: `ch_${amount}` }));
        const receipt = await ctx.step("receipt", () => {
          ran.push("receipt");
          if (failOnce) throw ((failOnce = false), new Error("mail server down"));
          return `sent for ${charge.chargeId}`;
        });
        await ctx.step("nothing", () => void ran.push("nothing"));
        return { charge, receipt };
      },
    });
    const { id } = await enqueue(t, order, { amount: 42 });
    await worker([order]);
    expect(ran).toEqual(["charge", "receipt", "receipt", "nothing"]);
    const job = await getJob(t, id);
    expect(job).toMatchObject({ status: "succeeded", result: { charge: { chargeId: "ch_42" }, receipt: "sent for ch_42" } });
    expect(job!.attemptHistory.map((a) => [a.outcome, a.error?.split("\n")[0], a.steps?.map((s) => `${s.name}:${s.replayed ? "replayed" : "ran"}`)])).toEqual([
      ["failed", 'in step "receipt": Error: mail server down', ["charge:ran"]],
      ["succeeded", undefined, ["charge:replayed", "receipt:ran", "nothing:ran"]],
    ]);
    expect(job!.attemptHistory[1]!.steps!.every((s) => s.ms >= 0)).toBe(true);
    expect(await stepRows(id)).toEqual([
      { seq: 0, name: "charge", attempt: 1, result: { chargeId: "ch_42" } },
      { seq: 1, name: "receipt", attempt: 2, result: "sent for ch_42" },
      { seq: 2, name: "nothing", attempt: 2, result: null },
    ]);
    expect(job!.steps.map((s) => [s.position, s.name, s.attempt])).toEqual([[1, "charge", 1], [2, "receipt", 2], [3, "nothing", 2]]);
  });

  it("a step's record shares its round trip: the first with the start mark, each later one with nothing else, the last with the success", async () => {
    const texts: string[] = [];
    const counting: Queryable = { query: (text, values) => (texts.push(text), t.db.query(text, values)) };
    const ran: string[] = [];
    const three = defineJob({
      name: "three", queue: "steps", schema: z.object({}),
      handler: async (_p, ctx) => {
        for (const name of ["a", "b", "c"]) await ctx.step(name, () => (ran.push(name), name));
        return ran.length;
      },
    });
    const { id } = await enqueue(t, three, {});
    await runWorker({ linger: "fixed", store: { db: counting, schema: t.schema }, registry: createRegistry([three]), queues: ["steps"], runnerId: `w-${driver}`, slots: 2, pollMs: 20, idleMs: 200 });
    expect(await getJob(t, id)).toMatchObject({ status: "succeeded", result: 3 });
    expect(await stepRows(id)).toMatchObject([{ name: "a" }, { name: "b" }, { name: "c" }]);
    const writes = texts.filter((q) => q.includes("job_steps as k"));
    // Three records in three statements, one of them the start mark's, one the success's: no round trip of their own for two.
    expect(writes).toHaveLength(3);
    expect(writes.filter((q) => q.includes("handler_started = true"))).toHaveLength(1);
    expect(writes.filter((q) => q.includes("status = 'succeeded'"))).toHaveLength(1);
    expect(texts.filter((q) => q.includes("status = 'succeeded'"))).toHaveLength(1);
  });

  it("a step record is written with its job's start mark or end only while the lease holds, once however often it is sent", async () => {
    const type = defineJob({ name: "fenced", queue: "steps", schema: z.object({}), handler: () => {} });
    const { id } = await enqueue(t, type, {});
    const [job] = await claimJobs(t, { queue: "steps", runnerId: "r", limit: 1, maxLeaseMs: 60_000, names: ["fenced"] });
    const record = (seq: number, leaseToken = job!.leaseToken) => ({ id, leaseToken, seq, name: `s${seq}`, result: JSON.stringify(seq), durationMs: 1 });
    expect((await settleJobs(t, { started: [job!], steps: [record(0)] })).steps).toEqual(new Set([`${id}/0`]));
    // Sent again (the first answer lost): written once, and said so.
    expect((await settleJobs(t, { steps: [record(0)] })).steps).toEqual(new Set([`${id}/0`]));
    // Another token: refused, alone or with an end.
    const stranger = "00000000-0000-4000-8000-000000000000";
    expect((await settleJobs(t, { steps: [record(1, stranger)] })).steps.size).toBe(0);
    expect(await settleJobs(t, { succeeded: [{ id, leaseToken: stranger }], steps: [record(1, stranger)] })).toMatchObject({ succeeded: new Set(), steps: new Set() });
    expect(await settleJobs(t, { succeeded: [{ ...job!, result: "1" }], steps: [record(1)] })).toMatchObject({ succeeded: new Set([id]), steps: new Set([`${id}/1`]) });
    // The lease ended with that success: a late record is refused.
    expect((await settleJobs(t, { steps: [record(2)] })).steps.size).toBe(0);
    expect((await stepRows(id)).map((r) => [r.name, r.result])).toEqual([["s0", 0], ["s1", 1]]);
  });

  it("the completer never writes a job's end before that job's step record, however small its batches", async () => {
    const type = defineJob({ name: "ordered", queue: "steps", schema: z.object({}), handler: () => {} });
    await enqueue(t, type, {});
    await enqueue(t, type, {});
    const [a, b] = await claimJobs(t, { queue: "steps", runnerId: "r", limit: 2, maxLeaseMs: 60_000, names: ["ordered"] });
    const reports: SettleReport[] = [];
    const completer = new Completer({ store: t, clock: systemClock, onSettled: (r) => void reports.push(r), maxBatch: 1 });
    const deadline = Date.now() + 60_000;
    const record = (job: typeof a) => ({ id: job!.id, leaseToken: job!.leaseToken, seq: 0, name: "only", result: null, durationMs: 1, deadline });
    const written = [completer.recordStep(record(a)), completer.recordStep(record(b))];
    completer.succeed({ id: b!.id, leaseToken: b!.leaseToken, deadline });
    await completer.drain();
    expect(await Promise.all(written)).toEqual([true, true]);
    expect(reports).toMatchObject([{ lease: { id: b!.id }, kind: "succeeded", accepted: true }]);
    expect(await stepRows(b!.id)).toHaveLength(1);
    // Leaves nothing running for the tests after it.
    expect((await settleJobs(t, { succeeded: [a!] })).succeeded.size).toBe(1);
  });

  it("a dead job's reasons name the failing step", async () => {
    const doomed = defineJob({
      name: "doomed-step", queue: "steps", maxAttempts: 2, backoffMs: 0, schema: z.object({}),
      handler: async (_p, ctx) => {
        await ctx.step("reserve", () => 1);
        await ctx.step("pay", () => {
          throw new Error("card declined");
        });
      },
    });
    const { id } = await enqueue(t, doomed, {});
    await worker([doomed]);
    const job = await getJob(t, id);
    expect(job!.status).toBe("dead");
    expect(job!.attemptHistory.map((a) => a.error!.split("\n")[0])).toEqual([
      'in step "pay": Error: card declined', 'in step "pay": Error: card declined',
    ]);
  });

  it("the same step name twice in one run fails the attempt, even when the handler catches the error", async () => {
    const twice = defineJob({
      name: "twice", queue: "steps", maxAttempts: 1, schema: z.object({}),
      handler: async (_p, ctx) => {
        await ctx.step("a", () => 1);
        await ctx.step("a", () => 2).catch(() => "swallowed");
      },
    });
    const { id } = await enqueue(t, twice, {});
    await worker([twice]);
    const job = await getJob(t, id);
    expect(job!.status).toBe("dead");
    expect(job!.lastError).toMatch(new RegExp(`^StepOrderError: step "a" is used twice in one run of job ${id}: each step needs its own name`));
  });

  it("a replay that reaches the steps in another order fails the attempt: the code changed under the job", async () => {
    let version = 1;
    const changing = defineJob({
      name: "changing", queue: "steps", maxAttempts: 3, backoffMs: 0, schema: z.object({}),
      handler: async (_p, ctx: JobContext) => {
        await ctx.step(version === 1 ? "first" : "renamed", () => 1);
        if (version === 1) throw ((version = 2), new Error("deploy in between"));
      },
    });
    const { id } = await enqueue(t, changing, {});
    await worker([changing]);
    const job = await getJob(t, id);
    expect(job!.attemptHistory[1]!.error).toMatch(
      new RegExp(`^StepOrderError: step 1 of job ${id} is "renamed" in this run but "first" was recorded: the code changed under the job`),
    );
  });

  it("a long job yields between steps when its lease runs short, uncharged, and goes on under a fresh lease", async () => {
    const ran: number[] = [];
    // Each page takes 250 ms on the runner's clock, which moves only as its timers are reached.
    // It starts behind the database's, so the run_at a yield writes from it is already due.
    const clock = new ManualClock(Date.now() - 60_000);
    const long = defineJob({
      name: "long", queue: "steps", leaseMs: 1_200, maxAttempts: 1, schema: z.object({}),
      handler: async (_p, ctx) => {
        let total = 0;
        for (let i = 0; i < 6; i++) total += await ctx.step(`page ${i}`, async () => (ran.push(i), await new Promise<void>((r) => clock.after(250, r)), i));
        return total;
      },
    });
    const { id } = await enqueue(t, long, {});
    const summary = await onClock(clock, [long]);
    const job = await getJob(t, id);
    // Six pages of 250 ms do not fit one lease of 1.2 s (0.8 s before its signal): the job yielded, and one attempt was enough.
    expect(job).toMatchObject({ status: "succeeded", result: 15, attempts: 1 });
    expect(ran).toEqual([0, 1, 2, 3, 4, 5]);
    const outcomes = job!.attemptHistory.map((a) => a.outcome);
    expect(outcomes.filter((o) => o === "slept").length).toBeGreaterThanOrEqual(1);
    expect(outcomes.at(-1)).toBe("succeeded");
    expect(outcomes.filter((o) => o !== "slept")).toEqual(["succeeded"]);
    // On the runner's clock the schedule is exact: two pages fit (800 ms left, then 550), a third would not (300 < 2 × 250).
    expect(job!.attemptHistory.map((a) => a.steps?.filter((s) => !s.replayed).map((s) => s.name))).toEqual([
      ["page 0", "page 1"], ["page 2", "page 3"], ["page 4", "page 5"],
    ]);
    expect(summary.slept).toBe(outcomes.length - 1);
  });

  it("a job sleeping an hour holds no runner, its attempt given back, and the wake-up plan arms for its time; with the clock an hour on it resumes", async () => {
    const ran: string[] = [];
    const survey = defineJob({
      name: "survey", queue: "steps", schema: z.object({}),
      handler: async (_p, ctx) => {
        await ctx.step("receipt", () => void ran.push("receipt"));
        await ctx.sleep(60 * 60_000);
        await ctx.step("survey", () => void ran.push("survey"));
        return "asked";
      },
    });
    const { id } = await enqueue(t, survey, {});
    const before = Date.now();
    const summary = await worker([survey]);
    expect(summary).toMatchObject({ claimed: 1, slept: 1, succeeded: 0, leftQueued: 1, exit: "idle" });
    const asleep = await getJob(t, id);
    expect(asleep).toMatchObject({ status: "queued", attempts: 0, leaseExpiresAt: null });
    expect(asleep!.runAt.getTime() - before).toBeGreaterThanOrEqual(60 * 60_000);
    expect(asleep!.runAt.getTime() - Date.now()).toBeLessThanOrEqual(60 * 60_000);
    expect(asleep!.attemptHistory.map((a) => a.outcome)).toEqual(["slept"]);
    // Nothing is running: the only due time is the sleeper's, and the plan is
    // a one-time schedule, not a sleeping or polling function.
    const due = await nextDue(t, { names: ["survey"], maxLeaseMs: new Map([["steps", 60_000]]) });
    expect(due).toMatchObject({ leaseExpiresAt: null, laterAt: asleep!.runAt });
    const plan = planWake({
      nowMs: due.now.getTime(), dueMs: due.laterAt!.getTime(), remainingMs: 60_000,
      timing: { precisionMs: 60_000, startLeadMs: 2_000, armSlackMs: 3_000 },
    });
    expect(plan.kind).toBe("arm");
    // An hour later (the database's due time reached, the runner's clock moved on).
    await t.admin.query(`update "${t.schema}".jobs set run_at = now() where id = $1`, [id]);
    await onClock(new ManualClock(Date.now() + 60 * 60_000), [survey]);
    const woke = await getJob(t, id);
    expect(woke).toMatchObject({ status: "succeeded", result: "asked", attempts: 1 });
    expect(ran).toEqual(["receipt", "survey"]);
    expect(woke!.attemptHistory.map((a) => [a.outcome, a.steps?.map((s) => `${s.name}:${s.replayed ? "replayed" : "ran"}`)])).toEqual([
      ["slept", ["receipt:ran", "sleep 1:ran"]],
      ["succeeded", ["receipt:replayed", "sleep 1:replayed", "survey:ran"]],
    ]);
  });

  it("a short sleep wakes through the wake-up plan, with no runner in between, near its due time", async () => {
    let resumedAt = 0;
    let runner: Clock = systemClock;
    const nap = defineJob({
      name: "nap", queue: "steps", schema: z.object({}),
      handler: async (_p, ctx) => {
        await ctx.sleep(1_500);
        resumedAt = runner.now();
      },
    });
    const { id } = await enqueue(t, nap, {});
    expect(await worker([nap])).toMatchObject({ slept: 1 });
    const { runAt } = (await getJob(t, id))!;
    // The scheduler's part: ask when something is next due, sleep toward it, start a runner.
    const due = await nextDue(t, { names: ["nap"], maxLeaseMs: new Map([["steps", 60_000]]) });
    const plan = planWake({
      nowMs: due.now.getTime(), dueMs: due.laterAt!.getTime(), remainingMs: 60_000,
      timing: { precisionMs: 60_000, startLeadMs: 200, armSlackMs: 3_000 },
    });
    expect(plan.kind).toBe("sleep");
    if (plan.kind !== "sleep") return;
    // The scheduler's sleep passes with no one waiting for it: the database's
    // due time moves as much closer (the start lead still ahead), and the
    // runner it starts reads its clock as much later.
    const sleptMs = plan.untilMs - due.now.getTime();
    expect(sleptMs).toBeGreaterThan(0);
    await t.admin.query(`update "${t.schema}".jobs set run_at = run_at - $2 * interval '1 millisecond' where id = $1`, [id, sleptMs]);
    runner = laterClock(sleptMs);
    await worker([nap], { clock: runner, idleMs: 2_000 });
    expect((await getJob(t, id))!.status).toBe("succeeded");
    expect(resumedAt - runAt.getTime()).toBeGreaterThanOrEqual(0);
    expect(resumedAt - runAt.getTime()).toBeLessThan(1_000);
  });
});
