import { job } from "../../shared/jobs/enqueue.ts";
import { cpu, sweep, wait } from "../../test/fixtures/scenario-jobs.ts";
import { dist, drain, lambdaUse, readTimelines, round, runnersIdle, sleep, startScenarioStack, withLease, dbNow, type Dist, type LambdaUse } from "./harness.ts";
import type { Profile, ScenarioEnv } from "./profile.ts";

/**
 * mix: waiting jobs (an awaited timer honouring the AbortSignal) arrive at a
 * steady rate beside CPU jobs on the `cpu` queue (the one-slot `runner-cpu`),
 * plus a sweep enqueued ahead with runAt on each period boundary (every
 * minute in production). Wait = started − run_at.
 */
export interface MixParams {
  durationMs: number;
  /** One waiting job every this many ms (2 per second: 500). */
  waitEveryMs: number;
  waitMinMs: number;
  waitMaxMs: number;
  cpuEveryMs: number;
  cpuMs: number;
  /** Sweep period: runAt on each multiple of it (a minute in production). */
  sweepEveryMs: number;
  /** Waits of jobs enqueued in this first stretch (cold scheduler and runners) are also reported apart. */
  warmupMs: number;
  drainMs: number;
}

export const MIX_FULL: MixParams = {
  durationMs: 300_000, waitEveryMs: 500, waitMinMs: 2_000, waitMaxMs: 10_000, cpuEveryMs: 2_000, cpuMs: 1_000, sweepEveryMs: 60_000, warmupMs: 10_000, drainMs: 60_000,
};
export const MIX_QUICK: MixParams = {
  durationMs: 30_000, waitEveryMs: 500, waitMinMs: 500, waitMaxMs: 2_000, cpuEveryMs: 2_000, cpuMs: 1_000, sweepEveryMs: 10_000, warmupMs: 5_000, drainMs: 30_000,
};

export interface MixResult {
  params: MixParams;
  waiting: { enqueued: number; succeeded: number; wait: Dist; waitAfterWarmup: Dist };
  cpu: { enqueued: number; succeeded: number; wait: Dist };
  /** Waiting jobs that started while a CPU job was running, and the rest. */
  waitBesideCpu: Dist;
  waitNoCpu: Dist;
  /** Runner functions that ran each kind (from the runner log). */
  waitingRanIn: string[];
  cpuRanIn: string[];
  sweeps: { runAt: string; latenessS: number | null; status: string }[];
  sweepLatestStartS: number | null;
  lost: number;
  duplicated: number;
  lambda: LambdaUse;
}

export async function runMix(env: ScenarioEnv, profile: Profile, params: MixParams): Promise<MixResult> {
  const s = await startScenarioStack({ name: "mix", databaseUrl: env.databaseUrl, wsRelay: env.wsRelay, config: profile.config, cron: profile.cron, keepSchema: env.keepSchema });
  const lease = <T extends Parameters<typeof withLease>[0]>(t: T) => (profile.leaseMs ? withLease(t, profile.leaseMs) : t);
  try {
    const before = s.stats();
    const t0 = Date.now();
    // Sweeps: enqueued ahead (no wake-up: nothing is due yet), runAt on each period boundary of the database clock.
    const now = await dbNow(s);
    const sweeps = [];
    for (let at = Math.ceil(now / params.sweepEveryMs) * params.sweepEveryMs; at < now + params.durationMs; at += params.sweepEveryMs) {
      sweeps.push(job(lease(sweep), { minute: Math.floor(at / 1000) }, { runAt: new Date(at) }));
    }
    if (sweeps.length) await s.enqueue(sweeps, { wake: false });

    // Producer: absolute schedule, so slow enqueues do not drift the rates.
    let waits = 0;
    let cpus = 0;
    const events: { at: number; kind: "wait" | "cpu" }[] = [];
    for (let t = 0; t < params.durationMs; t += params.waitEveryMs) events.push({ at: t, kind: "wait" });
    for (let t = 0; t < params.durationMs; t += params.cpuEveryMs) events.push({ at: t, kind: "cpu" });
    events.sort((a, b) => a.at - b.at);
    const pending: Promise<unknown>[] = [];
    for (const e of events) {
      const delay = t0 + e.at - Date.now();
      if (delay > 0) await sleep(delay);
      if (e.kind === "wait") {
        waits++;
        const ms = Math.round(params.waitMinMs + Math.random() * (params.waitMaxMs - params.waitMinMs));
        pending.push(s.enqueue([job(lease(wait), { ms })]));
      } else {
        cpus++;
        pending.push(s.enqueue([job(lease(cpu), { ms: params.cpuMs })]));
      }
    }
    await Promise.all(pending);
    env.log?.(`mix: produced ${waits} waiting + ${cpus} cpu jobs, draining`);
    await drain(s, Date.now() + params.drainMs);
    await runnersIdle(s, Date.now() + 30_000);
    const lambda = lambdaUse(s.config, before, s.stats());
    const jobs = await readTimelines(s);
    const { rows: runnerRows } = await s.pool.query<{ request_id: string; runner: string }>(
      `select distinct request_id, runner from "${s.schema}".scenario_runner_log where request_id is not null`);
    const fnOf = new Map(runnerRows.map((r) => [r.request_id, r.runner]));

    const waiting = jobs.filter((j) => j.name === "scenario.wait");
    const cpuJobs = jobs.filter((j) => j.name === "scenario.cpu");
    const sweepJobs = jobs.filter((j) => j.name === "scenario.sweep");
    // Due time as enqueued (a retry moves run_at): the sweep's boundary, else the enqueue.
    const dueAt = (j: (typeof jobs)[number]) => (j.name === "scenario.sweep" ? (j.payload.minute as number) * 1000 : j.createdAt);
    const waitOf = (j: (typeof jobs)[number]) => (j.starts.length ? j.starts[0]!.at - dueAt(j) : null);
    const firstAt = Math.min(...jobs.filter((j) => j.name !== "scenario.sweep").map((j) => j.createdAt));
    const cpuWindows = cpuJobs.filter((j) => j.starts.length && j.finishes.length).map((j) => [j.starts[0]!.at, j.finishes.at(-1)!] as const);
    const beside: number[] = [];
    const alone: number[] = [];
    for (const j of waiting) {
      const w = waitOf(j);
      if (w === null) continue;
      const at = j.starts[0]!.at;
      (cpuWindows.some(([a, b]) => at >= a && at <= b) ? beside : alone).push(w);
    }
    const ranIn = (list: typeof jobs) => [...new Set(list.flatMap((j) => j.starts.map((st) => fnOf.get(st.runnerId ?? "") ?? "?")))].sort();
    const sweepRows = sweepJobs.map((j) => ({
      runAt: new Date(dueAt(j)).toISOString(),
      latenessS: waitOf(j) === null ? null : round(waitOf(j)! / 1000, 3),
      status: j.status,
    }));
    const lateness = sweepRows.flatMap((r) => (r.latenessS === null ? [] : [r.latenessS]));
    return {
      params,
      waiting: {
        enqueued: waiting.length,
        succeeded: waiting.filter((j) => j.status === "succeeded").length,
        wait: dist(waiting.flatMap((j) => waitOf(j) ?? [])),
        waitAfterWarmup: dist(waiting.filter((j) => j.createdAt >= firstAt + params.warmupMs).flatMap((j) => waitOf(j) ?? [])),
      },
      cpu: { enqueued: cpuJobs.length, succeeded: cpuJobs.filter((j) => j.status === "succeeded").length, wait: dist(cpuJobs.flatMap((j) => waitOf(j) ?? [])) },
      waitBesideCpu: dist(beside),
      waitNoCpu: dist(alone),
      waitingRanIn: ranIn(waiting),
      cpuRanIn: ranIn(cpuJobs),
      sweeps: sweepRows,
      sweepLatestStartS: lateness.length ? Math.max(...lateness) : null,
      lost: jobs.filter((j) => j.status !== "succeeded").length,
      duplicated: jobs.filter((j) => j.starts.length > 1).length,
      lambda,
    };
  } finally {
    await s.close();
  }
}
