import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvokeCommand } from "@aws-sdk/client-lambda";
import pg from "pg";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { brief, flaky, hold, quick } from "./fixtures/e2e-jobs.ts";
import { createOwnDatabase, databaseUrl } from "./support/db.ts";
import { startStack, until, type Stack } from "./support/stack.ts";

/**
 * Idle is zero and due work starts on time, measured on the functions run
 * for real (local Lambda runtime, local EventBridge Scheduler through the
 * real SDK client). Time is scaled, not mocked: the schedules' precision is
 * 2 s here instead of AWS's 60 s (x30), and every delay and window is scaled
 * alike, so the same code paths (sleep, arm an at() schedule, fire late in
 * the precision window) run in seconds.
 */
const SCALE = 60_000 / 2_000;
const WAKE = JSON.stringify({ source: "leasehold.wake" });

describe("wake-ups, on a stack whose schedules have 2 s precision (AWS: 60 s)", () => {
  let s: Stack;
  let db: Awaited<ReturnType<typeof createOwnDatabase>>;
  const server = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
  beforeAll(async () => {
    db = await createOwnDatabase();
    s = await startStack({
      runners: { runner: { queues: ["default"], slots: 10, memoryMb: 256, timeoutSeconds: 20, maxLeaseMs: 5_000, idleMs: 500, maxConcurrency: 3 } },
      scheduler: { pollMs: 200, timeoutSeconds: 15 },
      // Slack for a local cold start (tsx, on a shared 2-core host): ~2.5 s.
      wake: { precisionMs: 2_000, startLeadMs: 1_000, armSlackMs: 3_000 },
    }, { databaseUrl: db.url, runtime: { scheduleJitter: "late" } });
  });
  afterAll(async () => {
    await s.close();
    await db.drop();
    await server.end();
  });

  /**
   * Sessions opened to the stack's database, and its transactions committed,
   * so far (read from another database). Postgres's own autovacuum commits
   * transactions of its own there but opens no session.
   */
  const activity = async () => {
    await server.query("select pg_stat_clear_snapshot()");
    const { rows } = await server.query<{ sessions: string; commits: string }>(
      "select sessions::text, xact_commit::text as commits from pg_stat_database where datname = $1", [db.name]);
    return { sessions: Number(rows[0]!.sessions), commits: Number(rows[0]!.commits) };
  };
  const lateness = async (ids: string[]) =>
    (await s.t.admin.query<{ ms: number }>(
      `select extract(epoch from a.claimed_at - j.run_at) * 1000 as ms from "${s.t.schema}".jobs j
       join "${s.t.schema}".attempts a on a.job_id = j.id and a.attempt = j.attempts
       where j.id = any($1::bigint[]) and j.status = 'succeeded'`, [ids])).rows.map((r) => Number(r.ms));
  /** What an enqueue does after it commits: an asynchronous invoke of the scheduler. */
  const wake = () => s.lambda.send(new InvokeCommand({ FunctionName: "scheduler", InvocationType: "Event", Payload: WAKE }));
  const p95 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.ceil(xs.length * 0.95) - 1]!;

  it("after the queue drains and the runners exit, no function opens a connection for 20 s (10 minutes at AWS's scale)", async () => {
    await enqueueJobs(s.t, Array.from({ length: 30 }, (_, n) => job(quick, { n })));
    await wake();
    await until(async () => (await s.t.admin.query(`select 1 from "${s.t.schema}".jobs where status <> 'succeeded'`)).rowCount === 0, 40_000, "the queue to drain");
    await s.runtime.idle();
    // Settle Postgres's own bookkeeping first: analyze now, not in the window.
    await s.t.admin.query("vacuum analyze");
    await new Promise((r) => setTimeout(r, 11_000)); // idle backends flush their counts within 10 s
    const before = await activity();
    await new Promise((r) => setTimeout(r, 600_000 / SCALE));
    const after = await activity();
    console.log(`idle window: ${after.sessions - before.sessions} sessions, ${after.commits - before.commits} commits`);
    expect(after.sessions - before.sessions).toBe(0);
    expect(s.runtime.running("scheduler") + s.runtime.running("runner") + s.runtime.running("rescuer")).toBe(0);
  }, 90_000);

  it("20 delayed jobs coming due while everything is idle each start within 1 s of run_at (p95), whether the scheduler slept or armed an at() schedule", async () => {
    await s.runtime.idle();
    // 10 due within a scheduler's sleep (4-8.5 s), 10 after a 16 s gap that only an armed at() schedule bridges.
    const delays = Array.from({ length: 20 }, (_, n) => (n < 10 ? 4_000 : 20_000) + n * 500);
    const ids = (await enqueueJobs(s.t, delays.map((delayMs, n) => job(quick, { n }, { delayMs })))).map((j) => j.id);
    await wake();
    await until(async () => (await lateness(ids)).length === 20, 40_000, "20 delayed jobs");
    const late = await lateness(ids);
    expect(Math.min(...late)).toBeGreaterThanOrEqual(0);
    expect(p95(late)).toBeLessThan(1_000);
    expect(Object.keys(s.runtime.schedules.fired()).length).toBeGreaterThan(0);
  }, 60_000);

  it("a retry after its backoff (8-16 s, beyond any scheduler's sleep) starts within 1 s of its run_at", async () => {
    await s.runtime.idle();
    const ids = (await enqueueJobs(s.t, Array.from({ length: 5 }, (_, n) => job(flaky, { n })))).map((j) => j.id);
    await wake();
    await until(async () => (await lateness(ids)).length === 5, 40_000, "5 retried jobs to succeed");
    const late = await lateness(ids);
    expect(p95(late)).toBeLessThan(1_000);
  }, 60_000);

  it("a retry whose backoff is shorter than its lease starts within 1 s of its run_at: the runner that leaves it wakes the scheduler", async () => {
    await s.runtime.idle();
    // The scheduler that started the runner armed at(lease expiry) and returned
    // before the first attempts failed; the retries come due seconds before it fires.
    const ids = (await enqueueJobs(s.t, Array.from({ length: 5 }, (_, n) => job(brief, { n })))).map((j) => j.id);
    await wake();
    await until(async () => (await lateness(ids)).length === 5, 30_000, "5 retried jobs to succeed");
    const late = await lateness(ids);
    console.log(`retry lateness (ms): ${late.map((ms) => Math.round(ms)).join(", ")}`);
    expect(Math.min(...late)).toBeGreaterThanOrEqual(0);
    expect(p95(late)).toBeLessThan(1_000);
    const attempts = await s.t.admin.query<{ n: number }>(
      `select count(*)::int as n from "${s.t.schema}".attempts where job_id = any($1::bigint[]) and outcome = 'failed'`, [ids]);
    expect(attempts.rows[0]!.n).toBe(5);
  }, 60_000);

  it("jobs enqueued 2 s after every runner was SIGKILLed start within 2 s: a dead runner is not trusted", async () => {
    await enqueueJobs(s.t, Array.from({ length: 30 }, () => job(hold, {})));
    await wake();
    // Killed while working: each has announced itself and holds its jobs. (A runner killed in its
    // cold start, before it announced itself, counts as starting for STARTING_GRACE_MS instead.)
    await until(async () => (await s.t.admin.query(
      `select 1 from "${s.t.schema}".jobs where status = 'running'`)).rowCount === 30, 20_000, "3 runners holding the 30 jobs");
    for (const i of s.runtime.inflight().filter((i) => i.functionName === "runner")) process.kill(i.pid, "SIGKILL");
    await new Promise((r) => setTimeout(r, 2_000));
    const ids = (await enqueueJobs(s.t, Array.from({ length: 5 }, (_, n) => job(quick, { n }, { priority: 10 })))).map((j) => j.id);
    await wake();
    await until(async () => (await lateness(ids)).length === 5, 20_000, "the 5 new jobs");
    const waited = await s.t.admin.query<{ ms: number }>(
      `select extract(epoch from started_at - created_at) * 1000 as ms from "${s.t.schema}".jobs where id = any($1::bigint[])`, [ids]);
    expect(Math.max(...waited.rows.map((r) => Number(r.ms)))).toBeLessThan(2_000);
  }, 60_000);
});
