import { runnerFunctions } from "../../shared/settings/function-specs.ts";
import { job } from "../../shared/jobs/enqueue.ts";
import { wait } from "../../test/fixtures/scenario-jobs.ts";
import { lambdaUse, percentile, round, runnersIdle, sleep, startScenarioStack, type LambdaUse, type ScenarioStack } from "./harness.ts";
import type { Profile, ScenarioEnv } from "./profile.ts";

/**
 * Idle queue → enqueue → job started, through the local runtime: an enqueue
 * through the core, then a wake of the scheduler as the API does
 * (createSchedulerWaker), the scheduler's pass, the runner's invoke, its
 * claim, the handler's start. No cron: the wake-up path alone. Between trials
 * the queue is idle and no runner runs. Warm: the runner's execution
 * environment from the previous trial is reused; cold: it is killed first, so
 * the runner starts a new process (the scheduler stays warm in both).
 */
export interface LatencyParams {
  trials: number;
  /** Pause between trials, with the queue idle and no runner running. */
  gapMs: number;
}

export const LATENCY_FULL: LatencyParams = { trials: 20, gapMs: 300 };
export const LATENCY_QUICK: LatencyParams = { trials: 6, gapMs: 200 };

/** Median (p50) of each step, in ms, from the job's enqueue (jobs.created_at). */
export interface LatencyParts {
  /** The wake-up invoke accepted by Lambda (async invoke returned). */
  wakeAccepted: number | null;
  /** The scheduler's pass reserved a runner (its row in leasehold.runners). */
  schedulerPassDone: number | null;
  /** The runner invocation is running and has registered itself (after its init and first connection). */
  runnerStarted: number | null;
  /** The runner claimed the job (claimed_at). */
  firstClaim: number | null;
  /** The handler started (its first statement). */
  started: number | null;
}

export interface LatencyRun {
  trials: number;
  p50Ms: number | null;
  p95Ms: number | null;
  maxMs: number | null;
  parts: LatencyParts;
  runnerColdStarts: number;
  lambda: LambdaUse;
}

export interface LatencyResult {
  params: LatencyParams;
  warm: LatencyRun;
  cold: LatencyRun;
}

interface Trial { total: number; wakeAccepted: number; reserved: number; runnerStarted: number; claimed: number; started: number }

async function trial(s: ScenarioStack, waitFor: () => Promise<void>): Promise<Trial | null> {
  await waitFor();
  const wakesBefore = s.wakes.length;
  const [enqueued] = await s.enqueue([job(wait, { ms: 0 })]);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { rows } = await s.pool.query<{ n: number }>(`select count(*)::int as n from "${s.schema}".jobs where id = $1 and status = 'succeeded'`, [enqueued!.id]);
    if (rows[0]!.n === 1) break;
    if (Date.now() > deadline) return null;
    await sleep(20);
  }
  await s.waker.settled();
  const { rows } = await s.pool.query<{ created: number; reserved: number | null; runner_started: number | null; claimed: number; started: number }>(
    `select extract(epoch from j.created_at) * 1000 as created,
            (select extract(epoch from min(l.at)) * 1000 from "${s.schema}".scenario_runner_log l where l.event = 'reserved' and l.at >= j.created_at) as reserved,
            (select extract(epoch from l.at) * 1000 from "${s.schema}".scenario_runner_log l where l.event = 'started' and l.request_id = a.runner_id limit 1) as runner_started,
            extract(epoch from a.claimed_at) * 1000 as claimed,
            (select extract(epoch from min(e.at)) * 1000 from "${s.schema}".scenario_events e where e.job_id = j.id and e.kind = 'start') as started
     from "${s.schema}".jobs j join "${s.schema}".attempts a on a.job_id = j.id where j.id = $1`, [enqueued!.id]);
  const r = rows[0]!;
  const created = Number(r.created);
  const wake = s.wakes[wakesBefore];
  return {
    total: Number(r.started) - created,
    // The host clock: the database runs on this machine, on the same clock.
    wakeAccepted: wake ? wake.acceptedAt - created : NaN,
    reserved: r.reserved == null ? NaN : Number(r.reserved) - created,
    runnerStarted: r.runner_started == null ? NaN : Number(r.runner_started) - created,
    claimed: Number(r.claimed) - created,
    started: Number(r.started) - created,
  };
}

function summarize(trials: Trial[], coldStarts: number, lambda: LambdaUse): LatencyRun {
  const p = (xs: number[], q: number) => {
    const v = xs.filter(Number.isFinite);
    const x = percentile(v, q);
    return x === null ? null : round(x, 0);
  };
  const totals = trials.map((t) => t.total);
  return {
    trials: trials.length,
    p50Ms: p(totals, 50),
    p95Ms: p(totals, 95),
    maxMs: totals.length ? round(Math.max(...totals), 0) : null,
    parts: {
      wakeAccepted: p(trials.map((t) => t.wakeAccepted), 50),
      schedulerPassDone: p(trials.map((t) => t.reserved), 50),
      runnerStarted: p(trials.map((t) => t.runnerStarted), 50),
      firstClaim: p(trials.map((t) => t.claimed), 50),
      started: p(trials.map((t) => t.started), 50),
    },
    runnerColdStarts: coldStarts,
    lambda,
  };
}

export async function runLatency(env: ScenarioEnv, profile: Profile, params: LatencyParams): Promise<LatencyResult> {
  const s = await startScenarioStack({ name: "latency", databaseUrl: env.databaseUrl, wsRelay: env.wsRelay, config: profile.config, cron: false, keepSchema: env.keepSchema });
  try {
    const quiet = async () => {
      await runnersIdle(s, Date.now() + 30_000);
      await sleep(params.gapMs);
    };
    // Warm-up: one untimed trial starts a scheduler and a runner environment.
    await trial(s, quiet);
    const run = async (prepare: () => Promise<void>): Promise<LatencyRun> => {
      const before = s.stats();
      const trials: Trial[] = [];
      for (let i = 0; i < params.trials; i++) {
        const t = await trial(s, prepare);
        if (t) trials.push(t);
      }
      await runnersIdle(s, Date.now() + 30_000);
      const after = s.stats();
      const cold = runnerFunctions(s.config).map((f) => f.name).reduce((n, fn) => n + (after[fn]?.coldStarts ?? 0) - (before[fn]?.coldStarts ?? 0), 0);
      return summarize(trials, cold, lambdaUse(s.config, before, after));
    };
    const warm = await run(quiet);
    const cold = await run(async () => {
      await quiet();
      for (const pid of runnerFunctions(s.config).flatMap((f) => s.killIdleProcesses(f.name))) {
        while (alive(pid)) await sleep(10);
      }
      await sleep(50);
    });
    return { params, warm, cold };
  } finally {
    await s.close();
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
