import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Miniflare } from "miniflare";
import { enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { createTestDb, type TestDb } from "./support/db.ts";
import { edgeTestConfig, fireCron, postRun, runOnEdge, startEdge, until, type OracleHit } from "./support/edge.ts";
import { edgeJobs } from "./fixtures/edge/jobs.ts";

/**
 * The runner invariants that apply on the edge, checked on the edge runner
 * in workerd: attempts counted at claim, fencing, timeout through the
 * AbortSignal, release before the deadline, and a killed runner rescued.
 */
const types = edgeJobs(async () => {}, "node");
const type = (name: string) => types.get(name)!;
const RESCUE_CRON = "*/5 * * * *";
const config = (runner: Record<string, unknown> = {}) => ({
  ...edgeTestConfig(runner),
  edge: { ...edgeTestConfig(runner).edge, rescuer: { schedule: RESCUE_CRON } },
});

describe("the edge runner's invariants, in workerd", () => {
  let db: TestDb;
  let mf: Miniflare | undefined;
  let oracle: OracleHit[];
  let logs: Record<string, unknown>[];
  const jobRow = async (id: string) =>
    (await db.admin.query(`select status::text, attempts, lease_token::text from "${db.schema}".jobs where id = $1`, [id])).rows[0]!;
  const attempts = async (id: string) =>
    (await db.admin.query<{ attempt: number; outcome: string; runner_id: string; error: string | null; held_ms: number }>(
      `select attempt, outcome::text, runner_id, error, (extract(epoch from ended_at - claimed_at) * 1000)::float8 as held_ms
       from "${db.schema}".attempts where job_id = $1 order by attempt, ended_at`, [id])).rows;
  const start = async (runner: Record<string, unknown> = {}) => {
    mf = await startEdge({ schema: db.schema, config: config(runner), oracle, logs });
    return mf;
  };

  beforeEach(async () => {
    db = await createTestDb("pg");
    oracle = [];
    logs = [];
  });
  afterEach(async () => {
    await mf?.dispose();
    mf = undefined;
    await db.drop();
  });

  it("refuses a runner request without the shared secret, and claims nothing", async () => {
    const edge = await start();
    const id = (await enqueueJobs(db, [job(type("edge.noop"), { n: 1 })]))[0]!.id;
    expect((await postRun(edge, { runner: "edge-runner", invocationId: "x" }, null)).status).toBe(401);
    expect((await postRun(edge, { runner: "edge-runner", invocationId: "x" }, "wrong-secret-of-some-length")).status).toBe(401);
    expect(await jobRow(id)).toMatchObject({ status: "queued", attempts: 0 });
  });

  it("counts the attempt at claim: the job is running with attempt 1 while its handler runs", async () => {
    const edge = await start();
    const id = (await enqueueJobs(db, [job(type("edge.record"), { n: 1, sleepMs: 1_000 })]))[0]!.id;
    const run = runOnEdge(edge);
    await until(() => oracle.some((h) => h.event === "start"), 10_000, "the handler's start");
    expect(await jobRow(id)).toMatchObject({ status: "running", attempts: 1 });
    expect(oracle[0]).toMatchObject({ job: id, attempt: 1 });
    expect(await run).toMatchObject({ claimed: 1, succeeded: 1 });
    expect(await jobRow(id)).toMatchObject({ status: "succeeded", attempts: 1 });
  });

  it("fences: a settle after the lease was taken away is refused and writes nothing", async () => {
    const edge = await start();
    const id = (await enqueueJobs(db, [job(type("edge.record"), { n: 1, sleepMs: 1_000 })]))[0]!.id;
    const run = runOnEdge(edge);
    await until(() => oracle.some((h) => h.event === "start"), 10_000, "the handler's start");
    // Another runner holds it now (as after a rescue and a new claim).
    await db.admin.query(`update "${db.schema}".jobs set lease_token = gen_random_uuid() where id = $1`, [id]);
    expect(await run).toMatchObject({ succeeded: 0, stale: 1 });
    expect(oracle.filter((h) => h.event === "end")).toHaveLength(1);
    expect(await jobRow(id)).toMatchObject({ status: "running", attempts: 1 });
    expect(await attempts(id)).toEqual([]);
    expect(logs.map((l) => l.message)).toContain("stale settle refused: lease lost");
  });

  it("aborts an overrunning handler through its AbortSignal before the lease ends, records timeout, and reports the death", async () => {
    const edge = await start();
    const id = (await enqueueJobs(db, [job(type("edge.stuck"), { n: 1 })]))[0]!.id;
    expect(await runOnEdge(edge)).toMatchObject({ claimed: 1, timedOut: 1, succeeded: 0 });
    const started = oracle.find((h) => h.event === "start")!;
    const aborted = oracle.find((h) => h.event === "aborted")!;
    // Lease 2,000 ms from the claim, settle margin 500 ms: aborted 1,500 ms after the claim (the
    // handler starts a little later), never after the lease.
    expect(aborted.at - started.at).toBeGreaterThanOrEqual(1_000);
    expect(aborted.at - started.at).toBeLessThan(2_000);
    expect(await jobRow(id)).toMatchObject({ status: "dead", attempts: 1 });
    const [a] = await attempts(id);
    expect(a).toMatchObject({ attempt: 1, outcome: "timeout" });
    expect(a!.held_ms).toBeLessThan(2_000);
    const dead = logs.filter((l) => l.message === "job dead");
    expect(dead).toEqual([expect.objectContaining({ jobId: id, name: "edge.stuck", attempts: 1, reasons: [expect.stringMatching(/^timeout: /)] })]);
  });

  it("gives back the jobs it cannot start before its budget runs out, uncharged, before their leases end", async () => {
    // 6.5 s budget less the 5 s margin: 1.5 s for 1 s leases, 300 ms each, 2 at a time. A fixed
    // 5 s linger: the runner stays until its time ends (adaptive, it would leave as soon as the
    // queued jobs' leases no longer fit its time, before they all were given back).
    const edge = await start({ wallMs: 6_500, maxLeaseMs: 1_000, slots: 2, prefetch: 10, idleMs: 5_000, linger: "fixed" });
    await enqueueJobs(db, Array.from({ length: 12 }, (_, n) => job(type("edge.slow"), { n })));
    const summary = await runOnEdge(edge);
    expect(summary.exit).toBe("time");
    expect(summary.succeeded).toBeGreaterThanOrEqual(1);
    expect(summary.released).toBeGreaterThanOrEqual(1);
    expect((summary.succeeded as number) + (summary.released as number)).toBe(summary.claimed);
    const { rows } = await db.admin.query<{ status: string; attempts: number; n: number }>(
      `select status::text, attempts, count(*)::int as n from "${db.schema}".jobs group by 1, 2 order by 1`,
    );
    expect(rows).toEqual([
      { status: "queued", attempts: 0, n: 12 - (summary.succeeded as number) },
      { status: "succeeded", attempts: 1, n: summary.succeeded },
    ]);
    const released = (await db.admin.query<{ held_ms: number }>(
      `select (extract(epoch from ended_at - claimed_at) * 1000)::float8 as held_ms from "${db.schema}".attempts where outcome = 'released'`,
    )).rows;
    expect(released).toHaveLength(summary.released as number);
    for (const r of released) expect(r.held_ms).toBeLessThan(1_000);
  });

  it("a runner killed mid-run (its workerd disposed) is rescued by the edge rescuer, and the job runs again to success", async () => {
    let edge = await start();
    const id = (await enqueueJobs(db, [job(type("edge.record"), { n: 1, firstSleepMs: 60_000 })]))[0]!.id;
    void postRun(edge, { runner: "edge-runner", invocationId: "killed" }).catch(() => {});
    await until(() => oracle.some((h) => h.event === "start"), 10_000, "the handler's start");
    // Killed once its start is on record, so the death charges the attempt.
    await until(async () => (await db.admin.query(
      `select 1 from "${db.schema}".jobs where id = $1 and handler_started`, [id])).rowCount === 1, 10_000, "the start mark");
    await edge.dispose();
    mf = undefined;
    // Rescue from a fresh instance once the 4 s lease has expired.
    edge = await start();
    await until(async () => (await db.admin.query(
      `select 1 from "${db.schema}".jobs where id = $1 and lease_expires_at < now()`, [id])).rowCount === 1, 10_000, "lease expiry");
    await fireCron(edge, RESCUE_CRON);
    expect(await jobRow(id)).toMatchObject({ status: "queued", attempts: 1 });
    const [expired] = await attempts(id);
    expect(expired).toMatchObject({ attempt: 1, outcome: "lease_expired" });
    expect(logs.map((l) => l.message)).toContain("rescue done");
    // The backoff passes, then the scheduler's runner takes it again.
    await db.admin.query(`update "${db.schema}".jobs set run_at = now() where id = $1`, [id]);
    await fireCron(edge);
    expect(await jobRow(id)).toMatchObject({ status: "succeeded", attempts: 2 });
    expect(oracle.filter((h) => h.event === "start").map((h) => h.attempt)).toEqual([1, 2]);
    expect(oracle.filter((h) => h.event === "end").map((h) => h.attempt)).toEqual([2]);
  });
});
