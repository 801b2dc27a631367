import { InvokeCommand } from "@aws-sdk/client-lambda";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { LOCAL_REGION } from "../../dev/lambda/lambda-env.ts";
import { parseSchedule, scheduledEvent } from "../../dev/lambda/schedule.ts";
import { functionSpecs, runnerFunctions } from "../../shared/settings/function-specs.ts";
import defaultConfig from "../../leasehold.config.ts";
import { job } from "../../shared/jobs/enqueue.ts";
import { wait } from "../../test/fixtures/scenario-jobs.ts";
import { lambdaUse, readTimelines, round, sleep, withLease, type LambdaUse, type ScenarioStack } from "./harness.ts";

/**
 * What sparse traffic costs, measured on the local runtime: jobs that each
 * arrive into an idle system (an isolated job), and an idle month (the
 * safety-net crons in Lambda $, Neon compute from the database sessions an
 * idle window opens). Prices in cost.ts.
 */

/** Neon: a compute stays up this long after its last query, at this size. */
export const NEON = { suspendMinutes: 5, cu: 0.25 };
/** EventBridge Scheduler, per scheduled invocation (us-east-1 list, beyond the free 14M a month; not re-checked). */
export const SCHEDULER_PER_INVOCATION = 1.0 / 1e6;

export interface FunctionUse {
  invocations: number;
  coldStarts: number;
  billedMs: number;
  gbSeconds: number;
  initMs: number;
  initGbSeconds: number;
  memoryMb: number;
}

export interface IsolatedResult {
  jobs: number;
  /** Per job, by function (scheduler, the runner function that ran it, and any other). */
  perJob: Record<string, FunctionUse>;
  /** Per job: Lambda requests + GB-s, and EventBridge one-time schedules that fired. */
  invocations: number;
  gbSeconds: number;
  initGbSeconds: number;
  schedulesFired: number;
  handlerMeanMs: number;
  /** The runner function that ran the jobs, and its memory. */
  runner: string;
  runnerMemoryMb: number;
  lambda: LambdaUse;
}

/**
 * A job into an idle system, `jobs` times (after one untimed warm-up):
 * everything it sets going, until all is quiet again. Isolated means no
 * neighbour within a runner's idle time: jobs that follow each other closer
 * are a stream, which a runner's adaptive linger learns and stays for.
 */
export async function measureIsolated(s: ScenarioStack, jobs: number, leaseMs: number): Promise<IsolatedResult> {
  const type = withLease(wait, leaseMs);
  const runners = runnerFunctions(s.config).map((f) => f.name);
  const fired = () => Object.values(s.runtime.schedules.fired()).reduce((a, b) => a + b, 0);
  // Quiet: no function running, no one-time schedule left to fire (an armed at() is part of what a job costs).
  const quiet = async () => {
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (Date.now() > deadline) throw new Error("the system did not go quiet within 120 s");
      const busy = [...runners, "scheduler", "rescuer"].some((fn) => s.runtime.running(fn) > 0);
      const armed = s.runtime.schedules.list().some((d) => d.ScheduleExpression.startsWith("at("));
      if (!busy && !armed) return;
      await sleep(100);
    }
  };
  const one = async () => {
    const [enqueued] = await s.enqueue([job(type, { ms: 0 })]);
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (Date.now() > deadline) throw new Error(`isolated job ${enqueued!.id} did not succeed within 60 s`);
      const { rows } = await s.pool.query(`select 1 from "${s.schema}".jobs where id = $1 and status = 'succeeded'`, [enqueued!.id]);
      if (rows.length) break;
      await sleep(20);
    }
    await s.waker.settled();
    await quiet();
    await sleep(isolation);
  };
  const isolation = Math.max(...Object.values(s.config.runners).map((r) => r.idleMs)) + 500;
  await one();
  const before = s.stats();
  const firedBefore = fired();
  const createdAfter = Date.now();
  for (let i = 0; i < jobs; i++) await one();
  const use = lambdaUse(s.config, before, s.stats());
  const memory = Object.fromEntries(functionSpecs(s.config).map((f) => [f.name, f.memoryMb]));
  const perJob: Record<string, FunctionUse> = {};
  for (const [fn, u] of Object.entries(use.byFunction)) {
    const initGbSeconds = (u.initMs / 1000) * ((memory[fn] ?? 0) / 1024);
    perJob[fn] = {
      invocations: round(u.invocations / jobs, 2), coldStarts: round(u.coldStarts / jobs, 2), billedMs: round(u.billedMs / jobs, 1),
      gbSeconds: round(u.gbSeconds / jobs, 4), initMs: round(u.initMs / jobs, 1), initGbSeconds: round(initGbSeconds / jobs, 4), memoryMb: memory[fn] ?? 0,
    };
  }
  const runner = runners.filter((fn) => perJob[fn]).sort((a, b) => perJob[b]!.invocations - perJob[a]!.invocations)[0] ?? runners[0]!;
  const timelines = (await readTimelines(s)).filter((j) => j.createdAt >= createdAfter - 1_000 && j.starts.length && j.finishes.length);
  const handlerMs = timelines.map((j) => j.finishes.at(-1)! - j.starts[0]!.at);
  return {
    jobs,
    perJob,
    invocations: round(use.invocations / jobs, 2),
    gbSeconds: round(use.gbSeconds / jobs, 4),
    initGbSeconds: round(use.initGbSeconds / jobs, 4),
    schedulesFired: round((fired() - firedBefore) / jobs, 2),
    handlerMeanMs: round(handlerMs.reduce((a, b) => a + b, 0) / Math.max(1, handlerMs.length), 2),
    runner,
    runnerMemoryMb: memory[runner] ?? 0,
    lambda: use,
  };
}

export interface IdleResult {
  /** The idle window watched, after the queue drained and every function stopped. */
  windowMs: number;
  /** Database sessions opened (pg_stat_database.sessions) and transactions committed in it. */
  sessions: number;
  commits: number;
  /** One safety-net tick of each cron on the empty queue, run to its end. */
  ticks: Record<"scheduler" | "rescuer", { billedMs: number; gbSeconds: number; sessions: number }>;
  /** The deployed safety net (shared/settings/config.ts), not the scenario profile's. */
  safetyNet: { scheduler: string; rescuer: string };
  lambdaDollarsPerMonth: number;
  /** Neon wake-ups a month: from idle windows (sessions seen) and from the safety net. */
  wakeUpsPerMonth: { idle: number; safetyNet: number };
  cuHoursPerMonth: { idle: number; safetyNet: number };
}

const MONTH_MS = 30 * 24 * 3600_000;

/**
 * An idle month: sessions opened in an idle window (read from another
 * database, as test/wake.test.ts does), scaled to a month (each window with
 * a session counts as one Neon wake-up, `NEON.suspendMinutes` awake); and
 * the safety-net crons, measured one tick each, at their deployed period.
 * Both crons are created by the same deploy and tick within a minute of
 * each other: one Neon wake-up per period.
 */
export async function measureIdle(
  s: ScenarioStack, db: OwnDatabase, windowMs: number, prices: { lambdaPerRequest: number; lambdaPerGbSecond: number },
): Promise<IdleResult> {
  await sleep(11_000); // idle backends flush their counts within 10 s
  const before = await db.activity();
  await sleep(windowMs);
  const after = await db.activity();
  const tick = async (fn: "scheduler" | "rescuer") => {
    const statsBefore = s.stats();
    const sessionsBefore = (await db.activity()).sessions;
    await s.lambda.send(new InvokeCommand({ FunctionName: fn, Payload: JSON.stringify(scheduledEvent(fn, LOCAL_REGION)) }));
    const u = lambdaUse(s.config, statsBefore, s.stats()).byFunction[fn] ?? { billedMs: 0, gbSeconds: 0 };
    await sleep(11_000);
    return { billedMs: u.billedMs, gbSeconds: round(u.gbSeconds, 4), sessions: (await db.activity()).sessions - sessionsBefore };
  };
  const ticks = { scheduler: await tick("scheduler"), rescuer: await tick("rescuer") };
  const safetyNet = { scheduler: defaultConfig.scheduler.schedule, rescuer: defaultConfig.rescuer.schedule };
  const perMonth = (expression: string) => MONTH_MS / parseSchedule(expression).intervalMs;
  const lambdaDollars =
    perMonth(safetyNet.scheduler) * (prices.lambdaPerRequest + ticks.scheduler.gbSeconds * prices.lambdaPerGbSecond) +
    perMonth(safetyNet.rescuer) * (prices.lambdaPerRequest + ticks.rescuer.gbSeconds * prices.lambdaPerGbSecond);
  const sessions = after.sessions - before.sessions;
  const wakeUps = {
    idle: sessions > 0 ? Math.min(MONTH_MS / windowMs, MONTH_MS / (NEON.suspendMinutes * 60_000)) : 0,
    safetyNet: ticks.scheduler.sessions + ticks.rescuer.sessions > 0 ? Math.max(perMonth(safetyNet.scheduler), perMonth(safetyNet.rescuer)) : 0,
  };
  const cuHours = (n: number) => round((n * NEON.suspendMinutes * NEON.cu) / 60, 2);
  return {
    windowMs, sessions, commits: after.commits - before.commits, ticks, safetyNet,
    lambdaDollarsPerMonth: Number(lambdaDollars.toPrecision(3)),
    wakeUpsPerMonth: wakeUps,
    cuHoursPerMonth: { idle: cuHours(wakeUps.idle), safetyNet: cuHours(wakeUps.safetyNet) },
  };
}

export interface OwnDatabase {
  url: string;
  /** Sessions opened and transactions committed in it so far, read from the server's own database. */
  activity(): Promise<{ sessions: number; commits: number }>;
  drop(): Promise<void>;
}

/** A database of its own, so that its sessions are the scenario's alone. */
export async function ownDatabase(serverUrl: string): Promise<OwnDatabase> {
  const name = `bench_cost_${randomBytes(4).toString("hex")}`;
  const server = new pg.Pool({ connectionString: serverUrl, max: 1 });
  await server.query(`create database ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async activity() {
      await server.query("select pg_stat_clear_snapshot()");
      const { rows } = await server.query<{ sessions: string; commits: string }>(
        "select sessions::text, xact_commit::text as commits from pg_stat_database where datname = $1", [name]);
      return { sessions: Number(rows[0]!.sessions), commits: Number(rows[0]!.commits) };
    },
    async drop() {
      await server.query(`drop database if exists ${name} with (force)`);
      await server.end();
    },
  };
}
