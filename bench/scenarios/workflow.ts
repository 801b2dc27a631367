import { job } from "../../shared/jobs/enqueue.ts";
import { step } from "../../test/fixtures/scenario-jobs.ts";
import { dist, drain, lambdaUse, readTimelines, round, runnersIdle, startScenarioStack, withLease, type Dist, type LambdaUse } from "./harness.ts";
import type { Profile, ScenarioEnv } from "./profile.ts";

/**
 * workflow: `runs` runs of `steps` sequential light steps, all started at
 * once. Each step does one database round trip and enqueues the next
 * (ctx.enqueue). Hop = next step started − previous step finished.
 */
export interface WorkflowParams {
  runs: number;
  steps: number;
  /** Give up waiting after this long. */
  deadlineMs: number;
}

export const WORKFLOW_FULL: WorkflowParams = { runs: 50, steps: 10, deadlineMs: 180_000 };
export const WORKFLOW_QUICK: WorkflowParams = { runs: 50, steps: 10, deadlineMs: 60_000 };

export interface WorkflowResult {
  params: WorkflowParams;
  completedRuns: number;
  /** Runs whose every step ran exactly once, succeeded, in order. */
  exactRuns: number;
  stepJobs: number;
  /** Step jobs whose handler started more than once. */
  duplicatedSteps: number;
  hop: Dist;
  /** Part of the hop: next step's enqueue (jobs.created_at) → its start. */
  enqueueToStart: Dist;
  stepsPerSecond: number;
  wallSeconds: number;
  lambda: LambdaUse;
}

export async function runWorkflow(env: ScenarioEnv, profile: Profile, params: WorkflowParams): Promise<WorkflowResult> {
  const s = await startScenarioStack({ name: "workflow", databaseUrl: env.databaseUrl, wsRelay: env.wsRelay, config: profile.config, cron: profile.cron, keepSchema: env.keepSchema });
  try {
    const before = s.stats();
    const type = profile.leaseMs ? withLease(step, profile.leaseMs) : step;
    await s.enqueue(Array.from({ length: params.runs }, (_, run) => job(type, { run, step: 1, of: params.steps })));
    // Done when every run's last step has succeeded (or the deadline).
    const deadline = Date.now() + params.deadlineMs;
    for (;;) {
      const { rows } = await s.pool.query<{ n: number }>(
        `select count(*)::int as n from "${s.schema}".jobs where status = 'succeeded' and (payload->>'step')::int = $1`, [params.steps]);
      if (rows[0]!.n >= params.runs || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    await drain(s, Date.now() + 10_000);
    await runnersIdle(s, Date.now() + 30_000);
    const lambda = lambdaUse(s.config, before, s.stats());
    const jobs = await readTimelines(s);

    const byRun = new Map<number, typeof jobs>();
    for (const j of jobs) {
      const run = j.payload.run as number;
      byRun.set(run, [...(byRun.get(run) ?? []), j]);
    }
    const hops: number[] = [];
    const enqueueToStart: number[] = [];
    let completedRuns = 0;
    let exactRuns = 0;
    for (const runJobs of byRun.values()) {
      const ordered = [...runJobs].sort((a, b) => (a.payload.step as number) - (b.payload.step as number));
      const complete = ordered.length === params.steps && ordered.every((j, i) => j.payload.step === i + 1 && j.status === "succeeded");
      if (complete) completedRuns++;
      if (complete && ordered.every((j) => j.starts.length === 1 && j.attemptRows.length === 1)) exactRuns++;
      for (let i = 1; i < ordered.length; i++) {
        const prev = ordered[i - 1]!;
        const next = ordered[i]!;
        if (prev.finishes.length && next.starts.length) hops.push(next.starts[0]!.at - prev.finishes.at(-1)!);
        if (next.starts.length) enqueueToStart.push(next.starts[0]!.at - next.createdAt);
      }
    }
    const first = Math.min(...jobs.map((j) => j.createdAt));
    const last = Math.max(...jobs.flatMap((j) => j.finishes));
    const stepsRun = jobs.filter((j) => j.status === "succeeded").length;
    return {
      params,
      completedRuns,
      exactRuns,
      stepJobs: jobs.length,
      duplicatedSteps: jobs.filter((j) => j.starts.length > 1).length,
      hop: dist(hops),
      enqueueToStart: dist(enqueueToStart),
      stepsPerSecond: round(stepsRun / ((last - first) / 1000), 1),
      wallSeconds: round((last - first) / 1000, 2),
      lambda,
    };
  } finally {
    await s.close();
  }
}
