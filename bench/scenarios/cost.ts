import { job } from "../../shared/jobs/enqueue.ts";
import { wait } from "../../test/fixtures/scenario-jobs.ts";
import { measureIdle, measureIsolated, ownDatabase, SCHEDULER_PER_INVOCATION, type IdleResult, type IsolatedResult } from "./cost-sparse.ts";
import { drain, lambdaUse, readTimelines, round, runnersIdle, startScenarioStack, type LambdaUse } from "./harness.ts";
import type { Profile, ScenarioEnv } from "./profile.ts";

/**
 * Lambda cost per job, from the local runtime's accounting (invocations,
 * billed ms × memory, init), at AWS list prices, beside SQS + Lambda: a
 * burst, an isolated job (cost-sparse.ts), and an idle month in Lambda $
 * and Neon CU-hours.
 */

/** AWS Lambda x86 and SQS standard list prices (us-east-1) as given in issue 7; not re-checked. */
export const PRICES = {
  asOf: "2026-11-30",
  lambdaPerRequest: 0.2 / 1e6,
  lambdaPerGbSecond: 0.0000166667,
  sqsPerRequest: 0.4 / 1e6,
};

export interface CostParams {
  /** Jobs in the burst. */
  jobs: number;
  /** Jobs each enqueued into an idle system, one after another. */
  isolated: number;
  /** Idle window watched for database sessions. */
  idleWindowMs: number;
}

export const COST_FULL: CostParams = { jobs: 10_000, isolated: 10, idleWindowMs: 60_000 };
export const COST_QUICK: CostParams = { jobs: 2_000, isolated: 5, idleWindowMs: 20_000 };

export interface Cost {
  /** Per 10,000 jobs. */
  invocations: number;
  gbSeconds: number;
  /** Dollars per million jobs: requests + compute (+ init, billed since 1 Aug 2025). */
  dollarsPerMillion: number;
  dollarsPerMillionWithInit: number;
}

export interface CostResult {
  params: CostParams;
  /** N jobs enqueued at once (wake-ups only): the best case. */
  burst: Cost & { handlerMeanMs: number; wallSeconds: number; lambda: LambdaUse; drained: boolean; succeeded: number };
  /** SQS + Lambda for the same jobs, batch size 10, the same per-job handler time and memory. */
  sqs: Cost & { sqsRequestsPerJob: number };
  /** Each job into an idle system: all it set going, scheduler and armed at() schedules included. */
  isolated: Cost & IsolatedResult;
  /** SQS + Lambda for an isolated job: batch size 1, the memory and handler time of the runner that ran it. */
  sqsIsolated: Cost & { sqsRequestsPerJob: number; memoryMb: number };
  /** Isolated job, Leasehold ÷ SQS + Lambda, in $ per job (without and with init billed). */
  isolatedRatio: { dollars: number; withInit: number };
  idle: IdleResult;
}

/** Scales a Lambda use to 10,000 jobs and prices it. */
export function costOf(use: Pick<LambdaUse, "invocations" | "gbSeconds" | "initGbSeconds">, jobs: number): Cost {
  const k = 10_000 / jobs;
  const dollarsPerMillion = (use.invocations * PRICES.lambdaPerRequest + use.gbSeconds * PRICES.lambdaPerGbSecond) * (1e6 / jobs);
  return {
    invocations: round(use.invocations * k, 1),
    gbSeconds: round(use.gbSeconds * k, 1),
    dollarsPerMillion: round(dollarsPerMillion, 2),
    dollarsPerMillionWithInit: round(dollarsPerMillion + use.initGbSeconds * PRICES.lambdaPerGbSecond * (1e6 / jobs), 2),
  };
}

/**
 * SQS + Lambda (event source mapping, batch size `batch`): per job one
 * SendMessage, 1/batch ReceiveMessage and 1/batch DeleteMessageBatch (empty
 * long-poll receives of an idle queue are not counted); a Lambda invocation
 * per `batch` jobs, running its handlers one after another at `memoryMb`.
 * `initGbSecondsPerJob`: the init assumed billed per job (the column "init
 * billed"), the same as the Leasehold setup it is set beside.
 */
export function sqsCost(handlerMeanMs: number, memoryMb: number, batch = 10, initGbSecondsPerJob = 0): CostResult["sqs"] {
  const sqsRequestsPerJob = round(1 + 2 / batch, 2);
  const invocationsPerJob = 1 / batch;
  const gbSecondsPerJob = (handlerMeanMs / 1000) * (memoryMb / 1024);
  const perMillion = 1e6 * (sqsRequestsPerJob * PRICES.sqsPerRequest + invocationsPerJob * PRICES.lambdaPerRequest + gbSecondsPerJob * PRICES.lambdaPerGbSecond);
  return {
    invocations: 10_000 * invocationsPerJob,
    gbSeconds: round(10_000 * gbSecondsPerJob, 1),
    dollarsPerMillion: round(perMillion, 2),
    dollarsPerMillionWithInit: round(perMillion + 1e6 * initGbSecondsPerJob * PRICES.lambdaPerGbSecond, 2),
    sqsRequestsPerJob,
  };
}

export async function runCost(env: ScenarioEnv, profile: Profile, params: CostParams): Promise<CostResult> {
  // A database of its own: the sessions of the idle window are this stack's alone.
  const db = await ownDatabase(env.databaseUrl);
  try {
    const s = await startScenarioStack({ name: "cost", databaseUrl: db.url, wsRelay: env.wsRelay, config: profile.config, cron: false, keepSchema: true });
    try {
      // Sparse first, on an idle system: isolated jobs, then the idle window after them.
      const isolated = await measureIsolated(s, params.isolated, profile.leaseMs ?? 30_000);
      const isolatedCost = {
        ...costOf({ invocations: isolated.invocations, gbSeconds: isolated.gbSeconds, initGbSeconds: isolated.initGbSeconds }, 1),
        ...isolated,
      };
      // Armed at() schedules that fired are billed by EventBridge Scheduler.
      const scheduled = isolated.schedulesFired * SCHEDULER_PER_INVOCATION * 1e6;
      isolatedCost.dollarsPerMillion = round(isolatedCost.dollarsPerMillion + scheduled, 2);
      isolatedCost.dollarsPerMillionWithInit = round(isolatedCost.dollarsPerMillionWithInit + scheduled, 2);
      // Same init assumption: the consumer cold-starts as often as the runner that ran the job did, at its memory.
      const runnerInit = isolated.perJob[isolated.runner]?.initGbSeconds ?? 0;
      const sqsIsolated = { ...sqsCost(isolated.handlerMeanMs, isolated.runnerMemoryMb, 1, runnerInit), memoryMb: isolated.runnerMemoryMb };
      env.log?.(`cost: ${params.isolated} isolated jobs done; idle window of ${params.idleWindowMs / 1000} s`);
      const idle = await measureIdle(s, db, params.idleWindowMs, PRICES);
      env.log?.(`cost: idle done; burst of ${params.jobs}`);

      const before = s.stats();
      const startedAt = Date.now();
      for (let i = 0; i < params.jobs; i += 1_000) {
        await s.enqueue(Array.from({ length: Math.min(1_000, params.jobs - i) }, () => job(wait, { ms: 0 })));
      }
      const drained = await drain(s, Date.now() + 300_000);
      await runnersIdle(s, Date.now() + 30_000);
      await s.waker.settled();
      const use = lambdaUse(s.config, before, s.stats());
      const jobs = (await readTimelines(s)).filter((j) => j.createdAt >= startedAt - 1_000);
      const handlerMs = jobs.flatMap((j) => (j.starts.length && j.finishes.length ? [j.finishes.at(-1)! - j.starts[0]!.at] : []));
      const handlerMeanMs = handlerMs.reduce((a, b) => a + b, 0) / Math.max(1, handlerMs.length);
      const first = Math.min(...jobs.map((j) => j.createdAt));
      const last = Math.max(first, ...jobs.flatMap((j) => j.finishes));
      const runnerMemory = s.config.runners.runner?.memoryMb ?? 1024;
      return {
        params,
        burst: {
          ...costOf(use, Math.max(1, handlerMs.length)), handlerMeanMs: round(handlerMeanMs, 2), wallSeconds: round((last - first) / 1000, 1),
          lambda: use, drained, succeeded: handlerMs.length,
        },
        sqs: sqsCost(handlerMeanMs, runnerMemory),
        isolated: isolatedCost,
        sqsIsolated,
        isolatedRatio: {
          dollars: round(isolatedCost.dollarsPerMillion / sqsIsolated.dollarsPerMillion, 2),
          withInit: round(isolatedCost.dollarsPerMillionWithInit / sqsIsolated.dollarsPerMillionWithInit, 2),
        },
        idle,
      };
    } finally {
      await s.close();
    }
  } finally {
    await db.drop();
  }
}
