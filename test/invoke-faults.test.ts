/**
 * The scheduler when Lambda fails its Invokes: the real scheduler in the
 * local Lambda runtime, its Invokes sent through an endpoint that throttles
 * (429 with Retry-After), answers 404, resets the connection, refuses it, or
 * never answers (test/support/invoke-faults.ts). The local EventBridge
 * Scheduler is reached directly and works, as does the test's own client.
 * No cron runs: only what the scheduler itself leaves behind can start the
 * jobs once Invoke recovers. Time is scaled as in wake.test.ts: schedules
 * fire up to 4 s late (AWS: 60 s), the Invoke backoff tops out at 4 s
 * (default 60 s, also within the precision), the scheduler's timeout is
 * 12 s (default 90 s), so each scheduler ends by handing over to a successor
 * through the failing Invoke.
 */
import { InvokeCommand } from "@aws-sdk/client-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { alarmSpecs } from "../infra/alarm-specs.ts";
import { enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { alarmStates, type EmfDoc } from "./support/alarm-eval.ts";
import { quick } from "./fixtures/e2e-jobs.ts";
import { startInvokeFaults, type InvokeFault, type InvokeFaults } from "./support/invoke-faults.ts";
import { emfDocs, logLines, startStack, until, type Stack } from "./support/stack.ts";

const WAKE = JSON.stringify({ source: "leasehold.wake" });
const TIMEOUT_MS = 12_000;
const BACKOFF_MAX_MS = 4_000;
// Wider than the longest backoff and the slack: a retry due after this invocation is handed over, never armed.
const PRECISION_MS = 4_000;
/** How long each fault lasts: the first scheduler and those its at() schedules start. */
const FAULT_MS = 15_000;
const MODES: [InvokeFault, string][] = [
  ["throttle", "429 TooManyRequestsException, Retry-After 2 s"],
  ["notFound", "404 ResourceNotFoundException"],
  ["reset", "connection reset"],
  ["refuse", "connection refused"],
  ["hang", "no answer"],
];

type Line = { timestamp: string; function?: string; at?: string; retryInMs?: number };
const ms = (l: Line) => Date.parse(l.timestamp);

describe("the scheduler under failing Invokes, run for real in the local Lambda runtime", () => {
  let s: Stack;
  let faults: InvokeFaults;
  const recovered: { mode: InvokeFault; atMs: number }[] = [];
  beforeAll(async () => {
    faults = await startInvokeFaults();
    s = await startStack({
      runners: { runner: { queues: ["default"], slots: 10, memoryMb: 256, timeoutSeconds: 20, maxLeaseMs: 5_000, idleMs: 300, maxConcurrency: 2 } },
      scheduler: { pollMs: 200, timeoutSeconds: TIMEOUT_MS / 1000, invokeBackoffMaxMs: BACKOFF_MAX_MS },
      wake: { precisionMs: PRECISION_MS, startLeadMs: 500, armSlackMs: 1_000 },
      alarms: { invokeFailureMinutes: 1, invokeFailureThreshold: 3 },
    }, { runtime: { env: { AWS_ENDPOINT_URL_LAMBDA: faults.url, POWERTOOLS_LOG_LEVEL: "INFO" } } });
    faults.target = s.runtime.url;
  });
  afterAll(async () => {
    await s?.close();
    await faults?.close();
  });

  const lines = (message: string, requestId?: string) =>
    logLines(s, message).filter((l) => requestId === undefined || l.function_request_id === requestId) as unknown as Line[];
  const started = async (ids: string[]) =>
    (await s.t.admin.query<{ n: number }>(
      `select count(*)::int as n from "${s.t.schema}".jobs where id = any($1::bigint[]) and started_at is not null`, [ids])).rows[0]!.n;

  it.each(MODES)("%s (%s): returns normally, leaves no watch held, keeps an at() armed, backs off; the jobs start once Invoke recovers", async (mode) => {
    await s.runtime.idle();
    await faults.set(mode, { retryAfterSeconds: 2 });
    const ids = (await enqueueJobs(s.t, Array.from({ length: 3 }, (_, n) => job(quick, { n })))).map((j) => j.id);
    const firedSoFar = () => Object.values(s.runtime.schedules.fired()).reduce((a, b) => a + b, 0);
    const firedBefore = firedSoFar();
    const t0 = Date.now();
    // As an enqueue wakes it, but waited for, to see how it ends.
    const out = await s.lambda.send(new InvokeCommand({ FunctionName: "scheduler", Payload: WAKE }));
    const tookMs = Date.now() - t0;
    const requestId = out.$metadata.requestId!;
    const body = new TextDecoder().decode(out.Payload);
    expect(out.FunctionError, body).toBeUndefined();
    expect(tookMs).toBeLessThan(TIMEOUT_MS);
    const summary = JSON.parse(body) as { invoked: number; invokeFailures: number };
    expect(summary.invoked).toBe(0);
    expect(summary.invokeFailures).toBeGreaterThan(0);

    // No watch held by the ended invocation; no runner row, no attempt charged.
    const held = await s.t.admin.query(`select 1 from "${s.t.schema}".wake_watch where owner = $1`, [requestId]);
    expect(held.rowCount).toBe(0);
    expect((await s.t.admin.query(`select 1 from "${s.t.schema}".jobs where id = any($1::bigint[]) and attempts > 0`, [ids])).rowCount).toBe(0);

    // Each failure it met had an at() schedule still to fire, armed then or just before.
    const failures = lines("invoke failed", requestId).filter((l) => l.function === "runner" || l.function === "scheduler");
    const armed = lines("wake armed", requestId);
    expect(failures.length).toBeGreaterThan(0);
    for (const f of failures) {
      expect(armed.some((a) => ms(a) <= ms(f) + 3_000 && Date.parse(a.at!) > ms(f)), `an at() pending after the failure at ${f.timestamp}`).toBe(true);
    }
    const pending = s.runtime.schedules.list().filter((d) => d.ScheduleExpression.startsWith("at("));
    expect(pending.length + Object.keys(s.runtime.schedules.fired()).length).toBeGreaterThan(0);

    if (mode === "throttle") {
      // Retry-After (2 s) honoured between two asks in a row.
      const own = lines("invoke failed", requestId).filter((l) => l.function === "runner").map(ms);
      expect(Math.min(...own.slice(1).map((t, i) => t - own[i]!))).toBeGreaterThanOrEqual(1_900);
    }

    // The fault lasts: the schedulers the armed at() schedules start meet it too, and back off.
    await new Promise((r) => setTimeout(r, Math.max(0, t0 + FAULT_MS - Date.now())));
    expect(await started(ids)).toBe(0);
    const runnerFailures = lines("invoke failed").filter((l) => l.function === "runner" && ms(l) >= t0).map(ms);
    const first = runnerFailures[0]!;
    const early = runnerFailures.filter((t) => t < first + 3_000).length / 3;
    const late = runnerFailures.filter((t) => t >= first + 3_000).length / ((t0 + FAULT_MS - first - 3_000) / 1000);
    const schedulers = new Set(s.logs.filter((l) => l.fn === "scheduler" && l.line.startsWith("{") && Date.parse((JSON.parse(l.line) as Line).timestamp) >= t0)
      .map((l) => l.requestId)).size;
    console.log(`${mode}: first scheduler returned after ${tookMs} ms; ${schedulers} schedulers ran in the ${FAULT_MS / 1000} s fault; ` +
      `failed runner Invokes/s: ${early.toFixed(2)} in the first 3 s, ${late.toFixed(2)} after (${runnerFailures.length} in all; asked every pass, 5/s)`);
    // Still watched at the end of the fault: by a scheduler an at() schedule started (or is starting), or by one still to fire.
    const stillArmed = s.runtime.schedules.list().some((d) => d.ScheduleExpression.startsWith("at("));
    expect(firedSoFar() > firedBefore || stillArmed).toBe(true);
    // Each scheduler ended by handing over: refused, it fell back to its at() schedule (an account-wide throttle holds the hand-over back).
    if (mode !== "throttle") expect(lines("invoke failed").filter((l) => l.function === "scheduler" && ms(l) >= t0).length).toBeGreaterThan(0);
    // A missing function is asked once per backoff cap from the first failure (0.25/s here); the others back off from 1 s.
    if (mode === "notFound") expect(late).toBeLessThanOrEqual((1.25 * 1000) / BACKOFF_MAX_MS);
    else expect(late).toBeLessThan(early);
    expect(late).toBeLessThan(0.75);
    if (mode !== "refuse") {
      // What the endpoint saw is what the scheduler counted (a hung one may still be waiting for its answer).
      const seen = faults.records.filter((r) => r.fault === mode && r.fn === "runner" && r.atMs >= t0).length;
      expect(seen - runnerFailures.length).toBeGreaterThanOrEqual(0);
      expect(seen - runnerFailures.length).toBeLessThanOrEqual(1);
    }

    // Invoke recovers: no enqueue, no wake, no cron; what the scheduler left behind starts the jobs.
    await faults.set("none");
    const recoveredAt = Date.now();
    recovered.push({ mode, atMs: recoveredAt });
    await until(async () => (await started(ids)) === 3, BACKOFF_MAX_MS + PRECISION_MS + 15_000, "the jobs to start after recovery");
    const { rows } = await s.t.admin.query<{ ms: number }>(
      `select extract(epoch from max(started_at)) * 1000 as ms from "${s.t.schema}".jobs where id = any($1::bigint[])`, [ids]);
    const afterMs = Number(rows[0]!.ms) - recoveredAt;
    console.log(`${mode}: the jobs started ${Math.round(afterMs)} ms after Invoke recovered`);
    // The last backoff (at most 4 s), then a runner's cold start.
    expect(afterMs).toBeLessThan(BACKOFF_MAX_MS + PRECISION_MS + 4_000);
    await until(async () => (await s.t.admin.query(
      `select 1 from "${s.t.schema}".jobs where id = any($1::bigint[]) and status = 'succeeded'`, [ids])).rowCount === 3, 20_000, "the jobs to succeed");
    // The next fault starts clean: the at() schedules this one left (safety nets, now for nothing) would start schedulers into it.
    await s.runtime.idle();
    for (const d of s.runtime.schedules.list()) if (d.ScheduleExpression.startsWith("at(")) s.runtime.schedules.delete(d.Name, d.GroupName);
  }, 90_000);

  it("publishes accepted and failed Invokes apart, per function; the InvokeFailures alarm fires on them, and not once Invoke works", () => {
    const docs = emfDocs(s, "InvokeFailures", "scheduler") as unknown as EmfDoc[];
    const runnerDocs = docs.filter((d) => d.function === "runner");
    expect(runnerDocs.reduce((n, d) => n + (d.InvokeFailures as number), 0)).toBeGreaterThan(0);
    expect(runnerDocs.reduce((n, d) => n + (d.InvokesAccepted as number), 0)).toBeGreaterThan(0);
    const spec = alarmSpecs(s.config).find((a) => a.name === "InvokeFailures-runner")!;
    expect(spec).toBeDefined();
    const states = alarmStates(spec, docs);
    console.log(`InvokeFailures-runner per minute: ${states.map((p) => `${p.value} ${p.state}`).join(", ")}`);
    expect(states.some((p) => p.state === "ALARM")).toBe(true);
    // What was published once Invoke worked again (after the last failure): accepted Invokes only.
    const lastFailureMs = Math.max(...lines("invoke failed").map(ms));
    expect(lastFailureMs).toBeGreaterThan(recovered.at(-1)!.atMs - FAULT_MS);
    const quiet = docs.filter((d) => d._aws.Timestamp > lastFailureMs);
    expect(quiet.reduce((n, d) => n + (d.InvokesAccepted as number), 0)).toBeGreaterThan(0);
    expect(alarmStates(spec, quiet).every((p) => p.state === "OK")).toBe(true);
  });

  it("no scheduler invocation ended in an error or a timeout, whatever the fault", () => {
    const ended = s.logs.filter((l) => l.fn === "scheduler" && l.line.startsWith("REPORT"));
    expect(ended.length).toBeGreaterThan(MODES.length);
    expect(ended.filter((l) => l.line.includes("Status:"))).toEqual([]);
    expect(s.logs.filter((l) => l.fn === "scheduler" && l.line.startsWith("ERROR Invoke Error"))).toEqual([]);
  });
});

describe("the scheduler when neither Invoke nor EventBridge Scheduler answers", () => {
  let s: Stack;
  let faults: InvokeFaults;
  beforeAll(async () => {
    faults = await startInvokeFaults();
    // A port nothing listens on, for CreateSchedule.
    const closed = await startInvokeFaults();
    await closed.set("refuse");
    s = await startStack({
      runners: { runner: { queues: ["default"], slots: 10, memoryMb: 256, timeoutSeconds: 20, maxLeaseMs: 5_000, idleMs: 300, maxConcurrency: 2 } },
      scheduler: { pollMs: 200, timeoutSeconds: TIMEOUT_MS / 1000, invokeBackoffMaxMs: BACKOFF_MAX_MS },
      wake: { precisionMs: PRECISION_MS, startLeadMs: 500, armSlackMs: 1_000 },
    }, { runtime: { env: { AWS_ENDPOINT_URL_LAMBDA: faults.url, AWS_ENDPOINT_URL_SCHEDULER: closed.url, POWERTOOLS_LOG_LEVEL: "INFO" } } });
    faults.target = s.runtime.url;
    await faults.set("throttle");
  });
  afterAll(async () => {
    await s?.close();
    await faults?.close();
  });

  it("returns normally, lets its watch go, and says the queue is unwatched in WatchLost, the metric its alarm watches", async () => {
    await enqueueJobs(s.t, [job(quick, { n: 1 })]);
    const out = await s.lambda.send(new InvokeCommand({ FunctionName: "scheduler", Payload: WAKE }));
    expect(out.FunctionError, new TextDecoder().decode(out.Payload)).toBeUndefined();
    expect((await s.t.admin.query(`select 1 from "${s.t.schema}".wake_watch where owner = $1`, [out.$metadata.requestId])).rowCount).toBe(0);
    expect(logLines(s, "wake arm failed").length).toBeGreaterThan(0);
    expect(logLines(s, "queue left unwatched: no successor and no at() schedule")).toHaveLength(1);
    const spec = alarmSpecs(s.config).find((a) => a.name === "WatchLost")!;
    const docs = emfDocs(s, "WatchLost", "scheduler") as unknown as EmfDoc[];
    expect(docs.map((d) => d.WatchLost)).toEqual([1]);
    expect(alarmStates(spec, docs).map((p) => p.state)).toEqual(["ALARM"]);
  }, 30_000);
});
