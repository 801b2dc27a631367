import { InvokeCommand } from "@aws-sdk/client-lambda";
import { scheduledEvent } from "../../dev/lambda/schedule.ts";
import { LOCAL_REGION } from "../../dev/lambda/lambda-env.ts";
import { job } from "../../shared/enqueue.ts";
import { wait } from "../../test/fixtures/scenario-jobs.ts";
import { drain, lambdaUse, readTimelines, round, runnersIdle, startScenarioStack, type LambdaUse } from "./harness.ts";
import type { Profile, ScenarioEnv } from "./profile.ts";

/**
 * Lambda cost per job, from the local runtime's accounting (invocations,
 * billed ms × memory), at AWS list prices, beside SQS + Lambda.
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
}

export const COST_FULL: CostParams = { jobs: 10_000 };
export const COST_QUICK: CostParams = { jobs: 2_000 };

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
  burst: Cost & { handlerMeanMs: number; wallSeconds: number; lambda: LambdaUse };
  /** SQS + Lambda for the same jobs, batch size 10, the same per-job handler time and memory. */
  sqs: Cost & { sqsRequestsPerJob: number };
  /** One cron scheduler invocation on an empty queue: what the polling scheduler costs with no work at all. */
  idleCron: { billedMs: number; gbSeconds: number; periodMs: number; dollarsPerMonth: number };
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
 * SQS + Lambda (event source mapping, batch size 10): per job one SendMessage,
 * a tenth of a ReceiveMessage and a tenth of a DeleteMessageBatch (empty
 * long-poll receives of an idle queue are not counted); a Lambda invocation
 * per 10 jobs, each running its 10 handlers one after another at `memoryMb`.
 */
export function sqsCost(handlerMeanMs: number, memoryMb: number): CostResult["sqs"] {
  const sqsRequestsPerJob = 1 + 0.1 + 0.1;
  const invocationsPerJob = 0.1;
  const gbSecondsPerJob = (handlerMeanMs / 1000) * (memoryMb / 1024);
  const perMillion = 1e6 * (sqsRequestsPerJob * PRICES.sqsPerRequest + invocationsPerJob * PRICES.lambdaPerRequest + gbSecondsPerJob * PRICES.lambdaPerGbSecond);
  return {
    invocations: 10_000 * invocationsPerJob,
    gbSeconds: round(10_000 * gbSecondsPerJob, 1),
    dollarsPerMillion: round(perMillion, 2),
    dollarsPerMillionWithInit: round(perMillion, 2),
    sqsRequestsPerJob,
  };
}

export async function runCost(env: ScenarioEnv, profile: Profile, params: CostParams): Promise<CostResult> {
  const s = await startScenarioStack({ name: "cost", databaseUrl: env.databaseUrl, wsRelay: env.wsRelay, config: profile.config, cron: false, keepSchema: env.keepSchema });
  try {
    const before = s.stats();
    for (let i = 0; i < params.jobs; i += 1_000) {
      await s.enqueue(Array.from({ length: Math.min(1_000, params.jobs - i) }, () => job(wait, { ms: 0 })));
    }
    await drain(s, Date.now() + 300_000);
    await runnersIdle(s, Date.now() + 30_000);
    await s.waker.settled();
    const use = lambdaUse(s.config, before, s.stats());
    const jobs = await readTimelines(s);
    const handlerMs = jobs.flatMap((j) => (j.starts.length && j.finishes.length ? [j.finishes.at(-1)! - j.starts[0]!.at] : []));
    const handlerMeanMs = handlerMs.reduce((a, b) => a + b, 0) / Math.max(1, handlerMs.length);
    const first = Math.min(...jobs.map((j) => j.createdAt));
    const last = Math.max(...jobs.flatMap((j) => j.finishes));

    // One cron tick on the empty queue, run to its end.
    const beforeCron = s.stats();
    await s.lambda.send(new InvokeCommand({ FunctionName: "scheduler", Payload: JSON.stringify(scheduledEvent("scheduler", LOCAL_REGION)) }));
    const cronUse = lambdaUse(s.config, beforeCron, s.stats()).byFunction.scheduler!;
    const perMonth = (30 * 24 * 3600_000) / profile.cron.schedulerMs;
    const runnerMemory = s.config.runners.runner?.memoryMb ?? 1024;
    return {
      params,
      burst: { ...costOf(use, params.jobs), handlerMeanMs: round(handlerMeanMs, 2), wallSeconds: round((last - first) / 1000, 1), lambda: use },
      sqs: sqsCost(handlerMeanMs, runnerMemory),
      idleCron: {
        billedMs: cronUse.billedMs,
        gbSeconds: cronUse.gbSeconds,
        periodMs: profile.cron.schedulerMs,
        dollarsPerMonth: round(perMonth * (PRICES.lambdaPerRequest + cronUse.gbSeconds * PRICES.lambdaPerGbSecond), 2),
      },
    };
  } finally {
    await s.close();
  }
}
