import { NEON, SCHEDULER_PER_INVOCATION } from "./cost-sparse.ts";
import { PRICES, type Cost, type CostResult } from "./cost.ts";
import type { LatencyRun } from "./latency.ts";
import type { MixResult } from "./mix.ts";

/** The cost section of the scenario report (bench/scenarios/run.ts). */

type Row = Pick<Cost, "invocations" | "gbSeconds" | "dollarsPerMillion" | "dollarsPerMillionWithInit">;

function table(head: string[], rows: (string | number)[][]): string {
  return [`| ${head.join(" | ")} |`, `| ${head.map(() => "---").join(" | ")} |`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
}

const round1 = (x: number) => Math.round(x * 10) / 10;
const perMillion = (lambda: { invocations: number; gbSeconds: number; initGbSeconds: number }, jobs: number): Row => ({
  invocations: round1((lambda.invocations / jobs) * 10_000), gbSeconds: round1((lambda.gbSeconds / jobs) * 10_000),
  dollarsPerMillion: ((lambda.invocations * PRICES.lambdaPerRequest + lambda.gbSeconds * PRICES.lambdaPerGbSecond) / jobs) * 1e6,
  dollarsPerMillionWithInit: ((lambda.invocations * PRICES.lambdaPerRequest + (lambda.gbSeconds + lambda.initGbSeconds) * PRICES.lambdaPerGbSecond) / jobs) * 1e6,
});

export function costReport(c: CostResult, latencyWarm?: LatencyRun, mix?: MixResult): string[] {
  const out: string[] = [];
  const i = c.isolated;
  out.push("### Lambda cost per 10,000 jobs (runners + scheduler, from the runtime's accounting)");
  const cost = (name: string, x: Row) => [name, x.invocations, x.gbSeconds, `$${x.dollarsPerMillion.toFixed(2)}`, `$${x.dollarsPerMillionWithInit.toFixed(2)}`];
  // A burst that did not drain has no cost per job to speak of.
  const burst = c.burst.drained ? cost(`Leasehold, ${c.params.jobs} jobs at once`, c.burst)
    : [`Leasehold, ${c.params.jobs} jobs at once: **not drained** (${c.burst.succeeded} ran in 300 s)`, "–", "–", "–", "–"];
  const rows = [
    burst,
    cost(`SQS + Lambda, batch size 10 (modelled), ${c.sqs.sqsRequestsPerJob} SQS requests a job`, c.sqs),
    cost(`Leasehold, an isolated job (each into an idle system; ${i.jobs} measured)`, i),
    cost(`SQS + Lambda, batch size 1 (modelled), ${c.sqsIsolated.memoryMb} MB like ${i.runner}`, c.sqsIsolated),
  ];
  if (latencyWarm) rows.push(cost("Leasehold, latency scenario's jobs into an idle queue (warm)", perMillion(latencyWarm.lambda, latencyWarm.trials)));
  if (mix) {
    const jobs = mix.waiting.enqueued + mix.cpu.enqueued + mix.sweeps.length;
    rows.push(cost(`Leasehold, mix scenario (${jobs} jobs, crons included)`, perMillion(mix.lambda, jobs)));
  }
  out.push(table(["setup", "invocations", "GB-s", "$ per 1M jobs", "$ per 1M jobs, init billed"], rows));
  out.push(
    `**An isolated job costs ${c.isolatedRatio.dollars}× SQS + Lambda at batch size 1 (${c.isolatedRatio.withInit}× with init billed on both)**; ` +
      (c.burst.drained ? `a burst job costs ${(c.burst.dollarsPerMillion / c.sqs.dollarsPerMillion).toFixed(2)}× SQS + Lambda at batch size 10.` : "the burst did not drain."),
  );
  out.push("Per isolated job, by function (everything it set going, until every function had stopped and no armed schedule was left):");
  out.push(table(
    ["function", "memory MB", "invocations", "cold starts", "billed ms", "GB-s", "init ms", "init GB-s"],
    Object.entries(i.perJob).map(([fn, u]) => [fn, u.memoryMb, u.invocations, u.coldStarts, u.billedMs, u.gbSeconds, u.initMs, u.initGbSeconds]),
  ));
  out.push(
    `EventBridge one-time schedules fired per isolated job: ${i.schedulesFired} (at $${(SCHEDULER_PER_INVOCATION * 1e6).toFixed(2)} per million, counted in its row). ` +
      `Mean handler time ${i.handlerMeanMs} ms (burst: ${c.burst.handlerMeanMs} ms).`,
  );
  out.push(
    `Prices (us-east-1 list, x86, as given in issue 7, not re-checked; stated ${PRICES.asOf}): Lambda $0.20 per 1M requests, $0.0000166667 per GB-s; SQS $0.40 per 1M requests; ` +
      "EventBridge Scheduler $1.00 per 1M scheduled invocations; free tiers ignored. Neon/Postgres compute is not in the table. " +
      `"init billed": Lambda bills the INIT phase of on-demand functions since 1 Aug 2025; the runtime's gbSeconds leave init out, so it is added from its initMs. ` +
      "SQS + Lambda: per job one SendMessage, and per batch one ReceiveMessage, one DeleteMessageBatch and one Lambda invocation running its handlers one after another, " +
      "with the mean handler time measured here and the memory of the Leasehold runner beside it; empty long-poll receives of the event source mapping (a steady cost when idle) are not counted. " +
      `Same init assumption for the isolated job: its "init billed" column gives the SQS consumer the cold starts the Leasehold runner (${i.runner}) had per job, at the same memory; ` +
      "the scheduler's cold starts are Leasehold's alone.",
  );
  const d = c.idle;
  out.push("### Idle month (no jobs at all)");
  out.push(table(
    ["what", "measured", "per month"],
    [
      [`idle window after the queue drained and every function stopped`, `${d.sessions} database sessions, ${d.commits} commits in ${d.windowMs / 1000} s`,
        `${d.wakeUpsPerMonth.idle} Neon wake-ups, **${d.cuHoursPerMonth.idle} CU-hours**`],
      [`safety net: scheduler \`${d.safetyNet.scheduler}\`, rescuer \`${d.safetyNet.rescuer}\` (one tick each, empty queue)`,
        `scheduler ${d.ticks.scheduler.billedMs} ms (${d.ticks.scheduler.sessions} sessions), rescuer ${d.ticks.rescuer.billedMs} ms (${d.ticks.rescuer.sessions} sessions), 256 MB`,
        `**$${d.lambdaDollarsPerMonth.toPrecision(2)} of Lambda**; ${d.wakeUpsPerMonth.safetyNet} Neon wake-ups, **${d.cuHoursPerMonth.safetyNet} CU-hours**`],
    ],
  ));
  out.push(
    `Neon: a compute suspends ${NEON.suspendMinutes} minutes after its last query; at ${NEON.cu} CU each wake-up is ${NEON.suspendMinutes} minutes × ${NEON.cu} CU. ` +
      "Sessions are pg_stat_database.sessions of the scenario's own database, read from another. An idle window with any session would count as a wake-up per window; " +
      "the two safety-net crons are created by the same deploy and tick within a minute of each other: one wake-up per period. " +
      "Everything else Neon bills is the minutes of real activity (plus the 5-minute tail after it).",
  );
  return out;
}
