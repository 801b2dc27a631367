import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvokeCommand } from "@aws-sdk/client-lambda";
import pg from "pg";
import { getJob } from "../shared/observe/admin.ts";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { AWS_SCHEDULE_PRECISION_MS } from "../dev/lambda/eventbridge.ts";
import { survey } from "./fixtures/e2e-jobs.ts";
import { FastForwardClock } from "./support/clock.ts";
import { createOwnDatabase, databaseUrl } from "./support/db.ts";
import { startStack, until, type Stack } from "./support/stack.ts";

/**
 * A job asleep for an hour (`ctx.sleep`), on the functions run for real
 * (local Lambda runtime, local EventBridge Scheduler through the real SDK,
 * Postgres through the Neon driver), with the wake-up timing of AWS: `at()`
 * schedules fire up to 60 s late, here always at the end of that window
 * (the worst case). The hour is skipped, not waited for: the local
 * Scheduler's clock is fast-forwarded, and every time the database holds
 * is moved back by the same span, which to Postgres, the scheduler and the
 * runners is the same as the clock moving on (they compare stored times
 * with the database's now, or the database's differences with their own).
 */
const HOUR_MS = 60 * 60_000;
/** Real time left before the due time once the hour is skipped: the wake schedule fires within it. */
const LEFT_MS = 25_000;
const WAKE = JSON.stringify({ source: "leasehold.wake" });

/** Moves every time the schema holds `ms` into the past: to the database, `ms` have passed. */
async function shiftStoredTimes(db: pg.Client, schema: string, ms: number): Promise<void> {
  const back = (col: string) => `${col} = ${col} - $1::float8 * interval '1 millisecond'`;
  for (const [table, cols] of [
    ["jobs", ["run_at", "created_at", "started_at", "finished_at", "lease_expires_at"]],
    ["job_attempts", ["claimed_at", "ended_at"]],
    ["job_steps", ["recorded_at"]],
    ["runners", ["started_at", "expires_at"]],
    ["wake_watch", ["due_at", "watch_until"]],
    ["recurring_ticks", ["tick_at", "enqueued_at"]],
  ] as const) {
    await db.query(`update "${schema}".${table} set ${cols.map(back).join(", ")}`, [ms]);
  }
  // A sleep's wake time is recorded as its step's result (an ISO time).
  const { rows } = await db.query<{ job_id: string; generation: number; seq: number; until: string }>(
    `select job_id, generation, seq, result #>> '{}' as until from "${schema}".job_steps where name like 'sleep %'`);
  for (const r of rows) {
    await db.query(`update "${schema}".job_steps set result = $4::jsonb where job_id = $1 and generation = $2 and seq = $3`, [
      r.job_id, r.generation, r.seq, JSON.stringify(new Date(Date.parse(r.until) - ms).toISOString()),
    ]);
  }
}

describe("a job asleep for an hour, its hour skipped on the local EventBridge Scheduler's clock", () => {
  const clock = new FastForwardClock();
  let s: Stack;
  let db: Awaited<ReturnType<typeof createOwnDatabase>>;
  const server = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
  beforeAll(async () => {
    db = await createOwnDatabase();
    s = await startStack({
      runners: { runner: { queues: ["default"], slots: 4, memoryMb: 256, timeoutSeconds: 20, maxLeaseMs: 5_000, idleMs: 500 } },
      // Wake-up timing as deployed: 60 s precision, 2 s start lead, 3 s slack.
      scheduler: { pollMs: 200 },
    }, { databaseUrl: db.url, runtime: { scheduleJitter: "late", scheduleClock: clock } });
  });
  afterAll(async () => {
    await s.close();
    await db.drop();
    await server.end();
  });

  /** Sessions opened to the stack's database and transactions committed in it so far (read from another database). */
  const activity = async () => {
    await server.query("select pg_stat_clear_snapshot()");
    const { rows } = await server.query<{ sessions: string; commits: string }>(
      "select sessions::text, xact_commit::text as commits from pg_stat_database where datname = $1", [db.name]);
    return { sessions: Number(rows[0]!.sessions), commits: Number(rows[0]!.commits) };
  };
  /** Client backends on the stack's database, but the test's own (`ours`), that ran anything since `since` (the database's clock). */
  const busySince = async (since: Date, ours: number) =>
    (await server.query<{ application_name: string; state: string; query: string }>(
      `select application_name, state, left(query, 200) as query from pg_stat_activity
       where datname = $1 and backend_type = 'client backend' and state_change >= $2::timestamptz and pid <> $3::int`,
      [db.name, since, ours])).rows;
  const wake = () => s.lambda.send(new InvokeCommand({ FunctionName: "scheduler", InvocationType: "Event", Payload: WAKE }));

  it("holds no runner, lets no function reach the database for the hour, and resumes within the wake-up precision of its due time", async () => {
    expect(s.config.wake).toEqual({ precisionMs: AWS_SCHEDULE_PRECISION_MS, startLeadMs: 2_000, armSlackMs: 3_000 });
    const { id } = await enqueue(s.t, survey, {});
    await wake();
    const asleep = await until(async () => {
      const job = await getJob(s.t, id);
      return job?.status === "queued" && job.attemptHistory.length === 1 ? job : null;
    }, 30_000, "the job to sleep");
    expect(asleep.attemptHistory.map((a) => a.outcome)).toEqual(["slept"]);
    expect(asleep.runAt.getTime() - Date.now()).toBeGreaterThan(HOUR_MS - 60_000);
    await s.runtime.idle();

    // What watches the sleeper: one at() schedule, armed ahead of its due time
    // by the precision, the slack for a scheduler's start and the start lead.
    const schedules = await until(async () => {
      const armed = s.runtime.schedules.list().filter((d) => d.Name.startsWith("leasehold-wake"));
      return armed.length > 0 && clock.pending().length === armed.length ? armed : null;
    }, 10_000, "the wake schedule");
    expect(schedules).toHaveLength(1);
    const atMs = Date.parse(`${/^at\((.*)\)$/.exec(schedules[0]!.ScheduleExpression)![1]}Z`);
    const dueMs = asleep.runAt.getTime();
    expect(dueMs - atMs).toBeGreaterThanOrEqual(AWS_SCHEDULE_PRECISION_MS + 5_000);
    expect(dueMs - atMs).toBeLessThan(AWS_SCHEDULE_PRECISION_MS + 5_000 + 1_000);

    // Settle Postgres's own bookkeeping first, and let idle backends flush their counts (within 10 s).
    // The test's own session, for the shift, is opened before the window.
    await s.t.admin.query("vacuum analyze");
    const shifter = new pg.Client({ connectionString: db.url });
    await shifter.connect();
    const shifterPid = (await shifter.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;
    await new Promise((r) => setTimeout(r, 11_000));

    // Skip the hour but LEFT_MS: in the database, then on the Scheduler's clock.
    const skipMs = dueMs - Date.now() - LEFT_MS;
    const before = await activity();
    await shiftStoredTimes(shifter, s.t.schema, skipMs);
    clock.fastForward(skipMs);
    const windowStart = (await server.query<{ now: Date }>("select now()")).rows[0]!.now;
    // Until just before the wake schedule can fire (its at() plus the precision,
    // at most 5 s before the due time): no function runs.
    const windowEndMs = dueMs - skipMs - 5_000 - 1_500;
    const alive: string[] = [];
    while (Date.now() < windowEndMs) {
      alive.push(...s.runtime.inflight().map((i) => i.functionName));
      await new Promise((r) => setTimeout(r, 250));
    }
    const after = await activity();
    const busy = await busySince(windowStart, shifterPid);
    await shifter.end();
    console.log(`the skipped hour: ${after.sessions - before.sessions} sessions, ${busy.length} busy backends, ${after.commits - before.commits} commits (ours: the shift; Postgres's own autovacuum)`);
    expect(alive).toEqual([]);
    expect(after.sessions - before.sessions).toBe(0);
    // Each backend that ran anything, with its last statement, so a failure says what woke.
    expect(busy).toEqual([]);
    expect(await s.t.admin.query(`select 1 from "${s.t.schema}".jobs where status = 'running'`)).toHaveProperty("rowCount", 0);

    // The schedule fires (60 s precision, at the end of its window); the job resumes on time.
    const woke = await until(async () => {
      const job = await getJob(s.t, id);
      return job?.status === "succeeded" ? job : null;
    }, 60_000, "the job to resume and succeed");
    const shiftedDueMs = dueMs - skipMs;
    const lateMs = woke.attemptHistory.at(-1)!.claimedAt.getTime() - shiftedDueMs;
    console.log(`resumed ${lateMs} ms after its due time`);
    expect(lateMs).toBeGreaterThanOrEqual(0);
    expect(lateMs).toBeLessThan(AWS_SCHEDULE_PRECISION_MS);
    // What the plan promises: runners started the start lead ahead, claiming at the due time (a cold start's worth of slack).
    expect(lateMs).toBeLessThan(5_000);
    expect(woke.attemptHistory.map((a) => [a.outcome, a.steps?.map((st) => `${st.name}:${st.replayed ? "replayed" : "ran"}`)])).toEqual([
      ["slept", ["receipt:ran", "sleep 1:ran"]],
      ["succeeded", ["receipt:replayed", "sleep 1:replayed", "survey:ran"]],
    ]);
    const result = woke.result as { receipt: number; asked: number };
    expect(result.asked).toBeGreaterThanOrEqual(shiftedDueMs);
    expect(result.receipt).toBeLessThan(asleep.runAt.getTime() - HOUR_MS + 1_000);
  }, 150_000);
});
