import { describe, expect, it } from "vitest";
import * as z from "zod";
import type { ClaimedJob } from "../shared/lifecycle/claim.ts";
import { PermanentError } from "../shared/errors.ts";
import { defineJob } from "../shared/jobs/job.ts";
import { errorText, executeJob, MAX_SETTLE_MARGIN_MS, settleMarginMs } from "../shared/runner/executor.ts";
import { backoffMs, isTransient, retrying } from "../shared/runner/transient.ts";
import { ManualClock } from "./support/clock.ts";

/** The runner's parts that need no database, driven by a manual clock. */

const claimed = (leaseMs: number, payload: unknown = {}): ClaimedJob => ({
  id: "1", queue: "q", name: "t", payload, attempts: 1, run: 1, startFirst: false, maxAttempts: 3, leaseMs, backoffMs: 0,
  leaseToken: "00000000-0000-0000-0000-000000000000",
});
const context = { runnerId: "r", enqueue: async () => ({ id: "0", existing: false }) };

describe("the executor", () => {
  it("aborts the handler a settle margin before its lease deadline, and records timeout", async () => {
    const clock = new ManualClock();
    let abortedAt = -1;
    const type = defineJob({
      name: "t", schema: z.object({}), leaseMs: 8_000,
      handler: (_p, ctx) => new Promise(() => ctx.signal.addEventListener("abort", () => (abortedAt = clock.now()))),
    });
    const deadline = clock.now() + 8_000;
    const run = executeJob({ job: claimed(8_000), type, deadline, clock, context });
    await clock.advance(8_000 - MAX_SETTLE_MARGIN_MS - 1);
    expect(abortedAt).toBe(-1);
    await clock.advance(1);
    expect(abortedAt).toBe(deadline - MAX_SETTLE_MARGIN_MS);
    expect(await run).toMatchObject({ outcome: "timeout", permanent: false });
  });

  it("ends a handler that ignores its signal at the abort time, and hands a late reader an aborted signal", async () => {
    const clock = new ManualClock();
    let late: AbortSignal | undefined;
    let finishLate!: () => void;
    const type = defineJob({
      name: "t", schema: z.object({}), leaseMs: 4_000,
      // Never looks at its signal until long after the deadline.
      handler: (_p, ctx) => new Promise<void>((resolve) => (finishLate = () => ((late = ctx.signal), resolve()))),
    });
    const run = executeJob({ job: claimed(4_000), type, deadline: clock.now() + 4_000, clock, context });
    await clock.advance(3_000 - 1);
    expect(clock.pending()).toBe(1);
    await clock.advance(1);
    expect(await run).toMatchObject({ outcome: "timeout" });
    finishLate();
    await new Promise((r) => setImmediate(r));
    expect(late?.aborted).toBe(true);
    expect(String(late?.reason)).toContain("about to expire");
  });

  it("calls the start mark once the handler has run its time, on one timer at a time, and still aborts at the deadline", async () => {
    const clock = new ManualClock();
    const marks: number[] = [];
    const type = defineJob({ name: "t", schema: z.object({}), leaseMs: 8_000, handler: () => new Promise(() => {}) });
    const t0 = clock.now();
    const deadline = t0 + 8_000;
    const run = executeJob({ job: claimed(8_000), type, deadline, clock, context, markAfterMs: 50, onMark: () => marks.push(clock.now() - t0) });
    expect(clock.pending()).toBe(1);
    await clock.advance(49);
    expect(marks).toEqual([]);
    await clock.advance(1);
    expect(marks).toEqual([50]);
    expect(clock.pending()).toBe(1);
    await clock.advance(8_000 - MAX_SETTLE_MARGIN_MS - 50);
    expect(await run).toMatchObject({ outcome: "timeout" });
    expect(marks).toEqual([50]);
    expect(clock.pending()).toBe(0);
  });

  it("never calls the start mark of a handler that ended sooner", async () => {
    const clock = new ManualClock();
    let marked = false;
    const type = defineJob({ name: "t", schema: z.object({}), handler: () => {} });
    const outcome = await executeJob({ job: claimed(1_000), type, deadline: clock.now() + 1_000, clock, context, markAfterMs: 50, onMark: () => (marked = true) });
    expect(outcome).toEqual({ outcome: "succeeded" });
    expect(clock.pending()).toBe(0);
    await clock.advance(1_000);
    expect(marked).toBe(false);
  });

  it("leaves no timer behind once a handler finishes", async () => {
    const clock = new ManualClock();
    const type = defineJob({ name: "t", schema: z.object({}), handler: () => {} });
    expect(await executeJob({ job: claimed(1_000), type, deadline: clock.now() + 1_000, clock, context })).toEqual({ outcome: "succeeded" });
    expect(clock.pending()).toBe(0);
  });

  it("gives a handler a context it may destructure: every field, and step, sleep and signal working unbound", async () => {
    const clock = new ManualClock();
    let seen: unknown;
    const type = defineJob({
      name: "t", schema: z.object({}),
      handler: async (_p, { jobId, attempt, run, maxAttempts, leaseToken, runnerId, enqueue, step, sleep, sleepUntil, signal }) => {
        seen = { jobId, attempt, run, maxAttempts, leaseToken, runnerId, enqueue: typeof enqueue, step: typeof step, aborted: signal.aborted };
        // Unbound: a step without a store throws its own error, not a TypeError about `this`.
        expect(() => step("a", () => 1)).toThrow("ctx.step and ctx.sleep need the runner's store");
        await expect(sleep(-1)).rejects.toThrow("finite number of ms >= 0");
        expect(() => sleepUntil(new Date())).toThrow("need the runner's store");
      },
    });
    expect(await executeJob({ job: claimed(1_000), type, deadline: clock.now() + 1_000, clock, context })).toEqual({ outcome: "succeeded" });
    expect(seen).toEqual({
      jobId: "1", attempt: 1, run: 1, maxAttempts: 3, leaseToken: "00000000-0000-0000-0000-000000000000", runnerId: "r",
      enqueue: "function", step: "function", aborted: false,
    });
  });

  it("keeps a quarter of the lease for the settle, at least 400 ms (at most half the lease) and at most two seconds", () => {
    expect(settleMarginMs(200)).toBe(100);
    expect(settleMarginMs(1_000)).toBe(400);
    expect(settleMarginMs(1_600)).toBe(400);
    expect(settleMarginMs(2_000)).toBe(500);
    expect(settleMarginMs(60_000)).toBe(MAX_SETTLE_MARGIN_MS);
  });

  it("records success, a thrown error with its stack, and a permanent failure", async () => {
    const clock = new ManualClock();
    const run = (handler: () => unknown) =>
      executeJob({ job: claimed(1_000), type: defineJob({ name: "t", schema: z.object({}), handler }), deadline: clock.now() + 1_000, clock, context });
    expect(await run(() => "ok")).toEqual({ outcome: "succeeded", result: "\"ok\"" });
    expect(await run(() => { throw new Error("boom"); })).toMatchObject({ outcome: "failed", permanent: false, error: expect.stringMatching(/^Error: boom\n\s+at /) });
    expect(await run(() => { throw new PermanentError("card declined"); })).toMatchObject({ outcome: "failed", permanent: true, error: expect.stringContaining("card declined") });
    expect(clock.pending()).toBe(0); // no abort timer left behind
  });

  it("fails for good a payload that no longer matches the job's schema", async () => {
    const clock = new ManualClock();
    let ran = false;
    const type = defineJob({ name: "t", schema: z.object({ email: z.string() }), handler: () => void (ran = true) });
    const outcome = await executeJob({ job: claimed(1_000, { mail: 1 }), type, deadline: clock.now() + 1_000, clock, context });
    expect(outcome).toMatchObject({ outcome: "failed", permanent: true, error: expect.stringContaining("email") });
    expect(ran).toBe(false);
  });

  it("writes any error as text Postgres can store", () => {
    expect(errorText("a\u0000b\ud800c")).toBe("a\\0b\ufffdc");
    expect(errorText(Symbol("s"))).toBe("Symbol(s)");
  });
});

describe("transient errors", () => {
  it("tells a lost connection or a restarting server from a bad statement", () => {
    expect(isTransient(Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" }))).toBe(true);
    expect(isTransient(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }))).toBe(true);
    expect(isTransient(new Error("Connection terminated unexpectedly"))).toBe(true);
    expect(isTransient(new Error("Query read timeout"))).toBe(true);
    expect(isTransient(Object.assign(new Error("x"), { code: "08006" }))).toBe(true);
    expect(isTransient(Object.assign(new Error('relation "jobs" does not exist'), { code: "42P01" }))).toBe(false);
    expect(isTransient(Object.assign(new Error("duplicate key"), { code: "23505" }))).toBe(false);
    expect(isTransient(undefined)).toBe(false);
  });

  it("knows a transient SQLSTATE by its code alone, whatever the message says", () => {
    // A driver, a proxy or a translated server message may word these differently: the code decides.
    const coded = (code: string) => Object.assign(new Error("(message in another words)"), { code });
    for (const code of ["57P01", "57P02", "57P03", "53300", "53400", "40001", "40P01", "55P03", "57014", "08000", "08003", "08006"]) {
      expect(isTransient(coded(code)), code).toBe(true);
    }
    for (const code of ["42P01", "23505", "22P02", "42601", "P0001"]) expect(isTransient(coded(code)), code).toBe(false);
  });

  it("backs off exponentially with jitter, capped", () => {
    expect(backoffMs(1, 50, 2_000, () => 1)).toBe(50);
    expect(backoffMs(3, 50, 2_000, () => 1)).toBe(200);
    expect(backoffMs(3, 50, 2_000, () => 0)).toBe(100);
    expect(backoffMs(20, 50, 2_000, () => 1)).toBe(2_000);
  });

  it("retries transient errors with backoff until it works, and gives up when time runs out", async () => {
    const clock = new ManualClock();
    const reset = () => Object.assign(new Error("reset"), { code: "ECONNRESET" });
    let tries = 0;
    const waits: number[] = [];
    const ok = retrying(async () => (++tries < 4 ? Promise.reject(reset()) : "done"), {
      clock, until: () => Number.POSITIVE_INFINITY, random: () => 1, onRetry: (_e, _n, ms) => waits.push(ms),
    });
    await clock.advance(10_000);
    expect(await ok).toBe("done");
    expect(waits).toEqual([50, 100, 200]);

    const deadline = clock.now() + 300;
    let later = 0;
    const failing = retrying(async () => { later++; throw reset(); }, { clock, until: () => deadline, random: () => 1 });
    const settled = failing.catch((e: Error) => e.message);
    await clock.advance(10_000);
    expect(await settled).toBe("reset");
    expect(later).toBe(3); // tries at +0, +50, +150; the next would start past the deadline

    let bad = 0;
    await expect(retrying(async () => { bad++; throw new Error("syntax"); }, { clock, until: () => Number.POSITIVE_INFINITY })).rejects.toThrow("syntax");
    expect(bad).toBe(1);
  });
});
