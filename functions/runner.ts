import type { Context } from "aws-lambda";
import * as z from "zod";
import { lightRunner, RUNNER_MARGIN_MS } from "../shared/settings/config.ts";
import { environmentLinger } from "../shared/runner/linger.ts";
import type { SettledEvent } from "../shared/runner/options.ts";
import { Metric, type MetricName } from "../shared/observe/metrics-names.ts";
import { servingRules } from "../shared/settings/serving.ts";
import { runSession } from "../shared/runner/session.ts";
import type { WorkerSummary } from "../shared/runner/worker.ts";
import { createWaker, WAKE_EVENT } from "../shared/scheduler/wake.ts";
import type { LambdaClient } from "@aws-sdk/client-lambda";
import { resolveApp, type LeaseholdApp } from "./app.ts";
import { closePool, openPool } from "./env.ts";
import { readEnvironment } from "../shared/settings/environment.ts";
import { labelHandlerOutput } from "./job-output.ts";
import { logger, MetricUnit, publishPerQueue, reportDeaths, serviceMetrics, workerLog, type Unit } from "./observability.ts";

/**
 * The runner: invoked asynchronously by the scheduler, it claims jobs of its
 * queues into a fixed number of slots, runs them under their leases, settles
 * in batches, and exits when the queue is drained (after a short idle) or
 * when its remaining time could not cover another lease. If it leaves a job
 * queued behind it (a retry after backoff, a release), it wakes the
 * scheduler on its way out. Its database pool lives and dies within the
 * invocation.
 */
const eventSchema = z.object({
  /** Reservation id the scheduler recorded for this invocation. */
  invocationId: z.string().min(1).max(100).optional(),
  /** Epoch ms: started ahead of a due job, the runner waits for it until then. */
  waitUntil: z.number().int().positive().optional(),
  /** Overrides the runner's configured queues. */
  queues: z.array(z.string().min(1).max(128)).min(1).optional(),
});

export interface RunnerHandlerOptions extends LeaseholdApp {
  /** Which of `config.runners` this function is; default: $LEASEHOLD_RUNNER (set by infra; shared/settings/environment.ts). */
  runner?: string;
}

/** The runner's Lambda handler, for the app's job types and config. */
export function createRunnerHandler(options: RunnerHandlerOptions): (event: unknown, context: Context) => Promise<WorkerSummary> {
  const app = resolveApp(options);
  const { config, settings } = app;
  // Under `leasehold dev`, each handler's output comes out labelled by its job.
  const registry = labelHandlerOutput(app.registry);
  const env = readEnvironment();
  const name = options.runner ?? env.runner;
  const found = config.runners[name];
  if (!found) throw new Error(`no runner named ${name} in the config (runners: ${Object.keys(config.runners).join(", ")})`);
  const runnerConfig = found;
  // The light variant (less memory, fewer slots) counts in the fleet under its own function name.
  const light = env.runnerVariant === "light" ? runnerConfig.light : undefined;
  if (env.runnerVariant === "light" && !light) throw new Error(`runner ${name} has no light variant in the config`);
  const fleetName = light ? lightRunner(name) : name;
  // Loaded when a runner first wakes the scheduler: most invocations never do, and a cold start should not pay for the SDK.
  let lambda: LambdaClient | undefined;
  const wakeScheduler = async (scheduler: string) => {
    const { invokeAsync, lambdaClient } = await import("./aws.ts");
    await invokeAsync((lambda ??= lambdaClient()), scheduler, WAKE_EVENT);
  };
  // A handler's follow-ups are refused, as the API refuses them, when no runner could run them.
  const limits = { serving: servingRules(config) };
  return (event, context) => run(event, context);

  async function run(event: unknown, context: Context): Promise<WorkerSummary> {
    const parsed = eventSchema.safeParse(event ?? {});
    if (!parsed.success) throw new Error(`bad runner event: ${z.prettifyError(parsed.error)}`);
    const queues = parsed.data.queues ?? runnerConfig.queues;
    const runnerId = context.awsRequestId;
    const invocationId = parsed.data.invocationId ?? runnerId;
    logger.addContext(context);
    logger.appendKeys({ runnerId, runner: fleetName });

    // A follow-up this runner will not run itself wakes the scheduler, like any enqueue.
    const scheduler = env.schedulerFunction;
    const waker = createWaker(async () => void (scheduler && (await wakeScheduler(scheduler))), {
      onError: (err) => logger.warn("waking the scheduler failed", { error: String(err) }),
    });
    const counts = settleCounts();
    const pool = openPool(settings, config.connectionsPerRunner);
    const store = { db: pool, schema: settings.schema };
    let stale = 0;
    try {
      const summary = await runSession({
        store, registry, queues, runnerId, invocationId,
        runner: fleetName,
        requestId: runnerId,
        // A job with a longer lease is unserved, for this runner as for the scheduler.
        maxLeaseMs: runnerConfig.maxLeaseMs,
        slots: light?.slots ?? runnerConfig.slots,
        fair: runnerConfig.fair,
        remainingMs: () => context.getRemainingTimeInMillis(),
        marginMs: RUNNER_MARGIN_MS,
        idleMs: runnerConfig.idleMs,
        linger: runnerConfig.linger === "fixed" ? "fixed" : environmentLinger(fleetName, runnerConfig.pollMs, runnerConfig.idleMs),
        pollMs: runnerConfig.pollMs,
        // Waiting for work, one of its connections listens for enqueues; with one, it only polls.
        bell: config.connectionsPerRunner > 1,
        waitUntil: parsed.data.waitUntil,
        onFollowUp: () => waker.wake(),
        limits,
        log: workerLog,
        reportDeaths,
        onSettled: counts.onSettled,
      });
      stale = summary.stale;
      // A retry, a released or a sleeping job it leaves behind comes due with no runner
      // left: wake the scheduler to watch it (an exit that leaves nothing wakes
      // nothing). Sent after the runner left the fleet, so it is not counted.
      if (summary.leftQueued > 0) waker.wake();
      logger.info("runner done", { ...summary });
      return summary;
    } finally {
      await waker.settled();
      await closePool(pool);
      counts.publish(stale);
    }
  }
}

/**
 * The outcomes of one invocation, counted per queue as its settles are
 * accepted (a success logged), then published as metrics with its stale
 * settles.
 */
function settleCounts() {
  const counts = new Map<string, Record<"succeeded" | "failed" | "timeout", number>>();
  return {
    onSettled(e: SettledEvent): void {
      if (!e.accepted || e.outcome === "released" || e.outcome === "slept") return;
      const c = counts.get(e.queue) ?? { succeeded: 0, failed: 0, timeout: 0 };
      c[e.outcome]++;
      counts.set(e.queue, c);
      if (e.outcome === "succeeded") {
        logger.info("job succeeded", { jobId: e.jobId, name: e.name, attempt: e.attempt, run: e.run, outcome: e.outcome, durationMs: e.durationMs });
      }
    },
    publish(stale: number): void {
      const perQueue = new Map<string, [MetricName, Unit, number][]>();
      for (const [queue, c] of counts) {
        perQueue.set(queue, [
          [Metric.JobsSucceeded, MetricUnit.Count, c.succeeded],
          [Metric.JobsFailed, MetricUnit.Count, c.failed],
          [Metric.JobsTimedOut, MetricUnit.Count, c.timeout],
        ]);
      }
      publishPerQueue(perQueue);
      const service = serviceMetrics();
      service.addMetric(Metric.StaleSettles, MetricUnit.Count, stale);
      service.publishStoredMetrics();
    },
  };
}
