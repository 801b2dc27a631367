import type { SchedulerClient } from "@aws-sdk/client-scheduler";
import type { Context } from "aws-lambda";
import * as z from "zod";
import { readEnvironment } from "../shared/settings/environment.ts";
import { InvokeBackoff } from "../shared/scheduler/invoke-backoff.ts";
import { lambdaClient, schedulerClient } from "./aws.ts";
import { resolveApp, type LeaseholdApp } from "./app.ts";
import { logger } from "./observability.ts";
import { SchedulerInvocation, type SchedulerSummary, type WarmScheduler } from "./scheduler-invocation.ts";

/**
 * The scheduler starts runners for the jobs that are ready, and keeps one
 * invocation watching the next due time, so nothing polls while nothing is
 * due. Woken by an enqueue (API, CLI, an app's waker, a runner's follow-up
 * or its exit with a retry left behind), by a runner invocation that failed
 * (its on-failure destination), by a one-time schedule it armed, by a
 * recurring job's schedule, or by the daily safety-net cron, it loops: a pass (count ready jobs, fan out runner
 * invocations), rescue of expired leases, an `at()` schedule at the earliest
 * running lease's expiry (a runner may die), then the next due job or tick
 * decides (shared/scheduler/wake-plan.ts): return (nothing queued: no connection until
 * the next enqueue), sleep toward it with the pool closed (and start runners
 * `startLeadMs` early, told to wait for it), arm an EventBridge `at()`
 * schedule ahead of it by its 60 s precision, or hand over to a fresh
 * invocation. One invocation watches at a time (`watchDue`).
 *
 * No Invoke failure ends it in an error: a function Lambda refuses (throttled,
 * missing, a reset, no answer) is asked again after a backoff
 * (shared/scheduler/invoke-backoff.ts), an `at()` schedule is armed for that retry, and
 * a hand-over that fails falls back to an `at()` schedule; if that fails too,
 * WatchLost says so.
 */

/** First wait before asking again for an Invoke that failed (doubling, jittered, to `scheduler.invokeBackoffMaxMs`). */
const INVOKE_RETRY_BASE_MS = 1_000;

export { WAKE_EVENT } from "./waker.ts";
export { schedulePass, type InvokeRunner } from "./scheduler-pass.ts";

/** A successor started by a scheduler whose time runs out: it takes over that one's watch. */
const relaySchema = z.object({ relayFrom: z.string().min(1).max(100) });

/** A runner invocation that failed (crash, out of memory, timeout), as its on-failure destination delivers it. */
const failureSchema = z.object({
  requestContext: z.object({ functionArn: z.string(), condition: z.string() }),
  requestPayload: z.object({ invocationId: z.string().min(1).max(100).optional() }).optional(),
});

/** A recurring job's tick, as its EventBridge schedule delivers it; any other event is a wake-up. */
const tickSchema = z.object({ source: z.literal("leasehold.recurring"), name: z.string().min(1).max(200), scheduledTime: z.iso.datetime() });

/** The scheduler's Lambda handler, for the app's job types, recurring jobs and config. */
export function createSchedulerHandler(app: LeaseholdApp): (event: unknown, context: Context) => Promise<SchedulerSummary> {
  const resolved = resolveApp(app);
  let eventBridge: Promise<SchedulerClient> | undefined;
  const warm: WarmScheduler = {
    app: resolved,
    env: readEnvironment(),
    // One attempt per call: the backoff decides when to ask again.
    lambda: lambdaClient({ maxAttempts: 1 }),
    // Kept across the invocations of a warm environment: it remembers a throttle.
    backoff: new InvokeBackoff({
      baseMs: INVOKE_RETRY_BASE_MS, maxMs: resolved.config.scheduler.invokeBackoffMaxMs, now: Date.now, random: Math.random,
    }),
    eventBridge: () => (eventBridge ??= schedulerClient()),
    lastRescuerAt: Number.NEGATIVE_INFINITY,
  };
  return async (event, context) => {
    logger.addContext(context);
    const parsed = tickSchema.safeParse(event);
    const relay = relaySchema.safeParse(event);
    const failure = failureSchema.safeParse(event);
    const failedRunner = failure.success ? failure.data.requestPayload?.invocationId : undefined;
    if (failure.success) logger.warn("a runner invocation failed; looking at what it left", { runner: failure.data.requestContext.functionArn, invocationId: failedRunner });
    return new SchedulerInvocation(warm, context, {
      tick: parsed.success ? parsed.data : null,
      relayFrom: relay.success ? relay.data.relayFrom : null,
      failedRunner,
    }).run();
  };
}
