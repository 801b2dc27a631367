import { job } from "../../shared/jobs/enqueue.ts";
import { wait } from "../../test/fixtures/scenario-jobs.ts";
import {
  dist, drain, duplicatesAndHeld, lambdaUse, longestGap, readTimelines, round, runnersIdle, sleep, startScenarioStack, withLease,
  type Dist, type LambdaUse,
} from "./harness.ts";
import type { Profile, ScenarioEnv } from "./profile.ts";

/**
 * tenants: one group enqueues a burst at once while another (or several)
 * sends one job a second. Fair (the default) or not: `fair: false` runs the
 * same scenario with runners that ignore groups, for comparison. `killAtMs` in, every runner process in flight is SIGKILLed, and the
 * scheduler (cron and wake-ups) is paused for `pauseMs`, so runners may start
 * again only after it. Lost, duplicated, the small group's wait, and the
 * longest stall (largest gap between consecutive completions).
 */
export interface TenantsParams {
  bigJobs: number;
  smallEveryMs: number;
  durationMs: number;
  /** Each job waits this long (an awaited timer). */
  jobMs: number;
  killAtMs: number;
  /** Kill no sooner than this many jobs are running (0: at killAtMs whatever runs). */
  minRunningAtKill?: number;
  pauseMs: number;
  drainMs: number;
  /** Small groups, each sending one job every `smallEveryMs` (default 1, named "small"; else small-1 ...). */
  smallGroups?: number;
  /** False: the runners claim in priority order only, ignoring groups (`runners.<name>.fair`); default true. */
  fair?: boolean;
}

export const TENANTS_FULL: TenantsParams = { bigJobs: 1_000, smallEveryMs: 1_000, durationMs: 90_000, jobMs: 5_000, killAtMs: 20_000, pauseMs: 10_000, drainMs: 240_000 };
export const TENANTS_QUICK: TenantsParams = { bigJobs: 1_000, smallEveryMs: 500, durationMs: 25_000, jobMs: 2_000, killAtMs: 10_000, pauseMs: 3_000, drainMs: 60_000 };

export interface TenantsResult {
  params: TenantsParams;
  jobs: number;
  lost: number;
  /** Jobs whose handler started more than once. */
  duplicated: number;
  /** Of those, the jobs with an earlier start in a runner that was not killed: must be none. */
  duplicatedBeyondKilled: string[];
  /** Jobs the killed runners held (a lease_expired attempt under a killed runner's id), and those of them that had started. */
  heldByKilled: number;
  heldAndStarted: number;
  killedRunners: number;
  smallWait: Dist;
  bigWait: Dist;
  /** Largest gap between consecutive completions, and when it began (s after the start). */
  longestStallS: number;
  stallFromS: number;
  /** After the kill: first runner reserved by the scheduler, first job started (s after the start). */
  firstReserveAfterKillS: number | null;
  firstStartAfterKillS: number | null;
  /** Seconds from the kill to the next completion: how long no job finished. */
  killToNextCompletionS: number | null;
  wallSeconds: number;
  lambda: LambdaUse;
}

/** The profile's config with every runner's claim fair or not. */
function withFairness(config: Profile["config"], fair: boolean): Profile["config"] {
  const runners = Object.fromEntries(Object.entries(config.runners ?? {}).map(([name, r]) => [name, { ...r, fair }]));
  return { ...config, runners };
}

export async function runTenants(env: ScenarioEnv, profile: Profile, params: TenantsParams): Promise<TenantsResult> {
  const config = withFairness(profile.config, params.fair ?? true);
  const smallGroups = (params.smallGroups ?? 1) === 1 ? ["small"] : Array.from({ length: params.smallGroups! }, (_, i) => `small-${i + 1}`);
  const s = await startScenarioStack({ name: "tenants", databaseUrl: env.databaseUrl, wsRelay: env.wsRelay, config, cron: profile.cron, keepSchema: env.keepSchema });
  const type = profile.leaseMs ? withLease(wait, profile.leaseMs) : wait;
  try {
    const before = s.stats();
    const t0 = Date.now();
    await s.enqueue(Array.from({ length: params.bigJobs }, () => job(type, { ms: params.jobMs }, { group: "big" })));
    const killedIds = new Set<string>();
    let killedAt = 0;
    const killer = (async () => {
      await sleep(t0 + params.killAtMs - Date.now());
      while ((params.minRunningAtKill ?? 0) > 0) {
        const { rows } = await s.pool.query<{ n: number }>(
          `select count(*)::int as n from "${s.schema}".scenario_events e join "${s.schema}".jobs j on j.id = e.job_id
           where e.kind = 'start' and j.status = 'running'`);
        if (rows[0]!.n >= params.minRunningAtKill!) break;
        await sleep(50);
      }
      await s.pauseScheduling(params.pauseMs);
      killedAt = Date.now();
      const victims = s.killRunners();
      for (const v of victims) killedIds.add(v.requestId);
      env.log?.(`tenants: killed ${victims.length} runner processes at +${((killedAt - t0) / 1000).toFixed(1)} s; scheduling paused ${params.pauseMs} ms`);
    })();
    const pending: Promise<unknown>[] = [];
    for (let t = 0; t < params.durationMs; t += params.smallEveryMs) {
      const delay = t0 + t - Date.now();
      if (delay > 0) await sleep(delay);
      pending.push(s.enqueue(smallGroups.map((group) => job(type, { ms: params.jobMs }, { group }))));
    }
    await Promise.all([...pending, killer]);
    env.log?.("tenants: produced, draining");
    const drained = await drain(s, Date.now() + params.drainMs);
    if (!drained) env.log?.("tenants: NOT drained by the deadline");
    await runnersIdle(s, Date.now() + 30_000);
    const lambda = lambdaUse(s.config, before, s.stats());
    const jobs = await readTimelines(s);
    const { rows: reserved } = await s.pool.query<{ ms: number }>(
      `select extract(epoch from at) * 1000 as ms from "${s.schema}".scenario_runner_log where event = 'reserved' order by at`);

    const origin = Math.min(...jobs.map((j) => j.createdAt));
    const waitsOf = (group: string) =>
      jobs.filter((j) => j.group?.startsWith(group) && j.starts.length).map((j) => j.starts[0]!.at - j.createdAt);
    const completions = jobs.flatMap((j) => j.finishes).sort((a, b) => a - b);
    const stall = longestGap(completions);
    const { duplicated, held, heldStarted, duplicatedBeyondKilledIds } = duplicatesAndHeld(jobs, killedIds);
    // The kill, on the database clock: the host clock is the same one.
    const afterKill = (ms: number) => ms > killedAt;
    const firstReserve = reserved.map((r) => Number(r.ms)).find(afterKill);
    const firstStart = jobs.flatMap((j) => j.starts.map((st) => st.at)).filter(afterKill).sort((a, b) => a - b)[0];
    const rel = (ms: number | undefined) => (ms === undefined ? null : round((ms - origin) / 1000, 2));
    return {
      params,
      jobs: jobs.length,
      lost: jobs.filter((j) => j.status !== "succeeded").length,
      duplicated,
      duplicatedBeyondKilled: duplicatedBeyondKilledIds,
      heldByKilled: held,
      heldAndStarted: heldStarted,
      killedRunners: killedIds.size,
      smallWait: dist(waitsOf("small")),
      bigWait: dist(waitsOf("big")),
      longestStallS: round(stall.gapMs / 1000, 2),
      stallFromS: rel(stall.fromMs) ?? 0,
      firstReserveAfterKillS: rel(firstReserve),
      firstStartAfterKillS: rel(firstStart),
      killToNextCompletionS: (() => {
        const next = completions.find(afterKill);
        return next === undefined ? null : round((next - killedAt) / 1000, 2);
      })(),
      wallSeconds: round(((completions.at(-1) ?? origin) - origin) / 1000, 1),
      lambda,
    };
  } finally {
    await s.close();
  }
}
