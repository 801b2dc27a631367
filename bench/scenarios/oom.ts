import { runnerFunctions } from "../../shared/settings/function-specs.ts";
import { job } from "../../shared/jobs/enqueue.ts";
import { hog, wait } from "../../test/fixtures/scenario-jobs.ts";
import { dist, drain, lambdaUse, readTimelines, round, runnersIdle, sleep, startScenarioStack, withLease, type AttemptRow, type Dist, type LambdaUse } from "./harness.ts";
import type { Profile, ScenarioEnv } from "./profile.ts";

/**
 * oom: one job grows its memory until the runtime kills its runner (at the
 * runner's memoryMb), while ordinary jobs arrive beside it. Max attempts 3:
 * the job must start exactly 3 times and end `dead`, each death on record.
 */
export interface OomParams {
  ordinaryJobs: number;
  ordinaryEveryMs: number;
  ordinaryMs: number;
  /** The scenario's window; the drain may go past it (reported). */
  durationMs: number;
  drainMs: number;
}

export const OOM_FULL: OomParams = { ordinaryJobs: 210, ordinaryEveryMs: 1_000, ordinaryMs: 1_000, durationMs: 240_000, drainMs: 180_000 };
export const OOM_QUICK: OomParams = { ordinaryJobs: 40, ordinaryEveryMs: 400, ordinaryMs: 500, durationMs: 20_000, drainMs: 40_000 };

export interface OomResult {
  params: OomParams;
  hog: {
    starts: number;
    status: string;
    attempts: Pick<AttemptRow, "attempt" | "outcome" | "error">[];
    /** Seconds from its enqueue to `dead`. */
    deadAfterS: number | null;
  };
  ordinary: {
    jobs: number;
    succeeded: number;
    notSucceeded: number;
    /** Ordinary jobs with an expired attempt: they shared a runner with the hog when it died. */
    caughtInDeaths: number;
    /** Ordinary jobs whose handler started more than once. */
    duplicated: number;
    wait: Dist;
  };
  runnerDeaths: { killed: number; outOfMemory: number };
  lambda: LambdaUse;
}

export async function runOom(env: ScenarioEnv, profile: Profile, params: OomParams): Promise<OomResult> {
  const s = await startScenarioStack({ name: "oom", databaseUrl: env.databaseUrl, wsRelay: env.wsRelay, config: profile.config, cron: profile.cron, keepSchema: env.keepSchema });
  const lease = <T extends Parameters<typeof withLease>[0]>(t: T) => (profile.leaseMs ? withLease(t, profile.leaseMs) : t);
  try {
    const before = s.stats();
    const t0 = Date.now();
    const [hogJob] = await s.enqueue([job(lease(hog), {}, { maxAttempts: 3 })]);
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < params.ordinaryJobs; i++) {
      const delay = t0 + (i + 1) * params.ordinaryEveryMs - Date.now();
      if (delay > 0) await sleep(delay);
      pending.push(s.enqueue([job(lease(wait), { ms: params.ordinaryMs }, { group: "ordinary" })]));
    }
    await Promise.all(pending);
    const windowLeft = t0 + params.durationMs - Date.now();
    if (windowLeft > 0) await sleep(windowLeft);
    const drained = await drain(s, Date.now() + params.drainMs);
    if (!drained) env.log?.("oom: NOT drained by the deadline");
    await runnersIdle(s, Date.now() + 30_000);
    const lambda = lambdaUse(s.config, before, s.stats());
    const jobs = await readTimelines(s);
    const { rows } = await s.pool.query<{ ms: number | null }>(
      `select extract(epoch from finished_at - created_at) * 1000 as ms from "${s.schema}".jobs where id = $1 and status = 'dead'`, [hogJob!.id]);

    const h = jobs.find((j) => j.id === hogJob!.id)!;
    const ordinary = jobs.filter((j) => j.group === "ordinary");
    const runners = runnerFunctions(s.config).map((f) => f.name);
    const deaths = runners.reduce((acc, fn) => ({
      killed: acc.killed + (lambda.byFunction[fn]?.kills ?? 0),
      outOfMemory: acc.outOfMemory + (lambda.byFunction[fn]?.outOfMemory ?? 0),
    }), { killed: 0, outOfMemory: 0 });
    return {
      params,
      hog: {
        starts: h.starts.length,
        status: h.status,
        attempts: h.attemptRows.map((a) => ({ attempt: a.attempt, outcome: a.outcome, error: a.error })),
        deadAfterS: rows[0]?.ms == null ? null : round(Number(rows[0].ms) / 1000, 1),
      },
      ordinary: {
        jobs: ordinary.length,
        succeeded: ordinary.filter((j) => j.status === "succeeded").length,
        notSucceeded: ordinary.filter((j) => j.status !== "succeeded").length,
        caughtInDeaths: ordinary.filter((j) => j.attemptRows.some((a) => a.outcome === "lease_expired")).length,
        duplicated: ordinary.filter((j) => j.starts.length > 1).length,
        wait: dist(ordinary.filter((j) => j.starts.length).map((j) => j.starts[0]!.at - j.createdAt)),
      },
      runnerDeaths: deaths,
      lambda,
    };
  } finally {
    await s.close();
  }
}
