import type { SchedulerClient } from "@aws-sdk/client-scheduler";
import type { Context } from "aws-lambda";
import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { Config } from "../shared/config.ts";
import type { Registry } from "../shared/job.ts";
import type { Pool } from "../shared/db.ts";
import { describeDeaths } from "../shared/deaths.ts";
import { nextDue, releaseWatch, watchDue } from "../shared/due.ts";
import { dropFailedRunner } from "../shared/fleet.ts";
import { schedulePass as sharedPass } from "../shared/fanout.ts";
import { InvokeBackoff } from "../shared/invoke-backoff.ts";
import { rescueExpiredLeases } from "../shared/rescue.ts";
import { claimable } from "../shared/serving.ts";
import { planWake, SCHEDULER_MARGIN_MS } from "../shared/wake-plan.ts";
import { armWake, AWS_CALL_TIMEOUT_MS, disarmWake, lambdaClient, schedulerClient } from "./aws.ts";
import { resolveApp, type LeaseholdApp } from "./app.ts";
import { closePool, openPool } from "./env.ts";
import { readEnvironment, type Environment } from "../shared/environment.ts";
import { logger, reportDeaths } from "./observability.ts";
import { reportWatchLost, schedulerInvokes } from "./scheduler-invokes.ts";
import { WAKE_EVENT } from "./waker.ts";
import { enqueueRecurringTick, enqueueTicksSince, nextRecurringTickMs } from "./recurring-tick.ts";

/**
 * The scheduler starts runners for the jobs that are ready, and keeps one
 * invocation watching the next due time, so nothing polls while nothing is
 * due. Woken by an enqueue (API, CLI, an app's waker, a runner's follow-up
 * or its exit with a retry left behind), by a runner invocation that failed
 * (its on-failure destination), by a one-time schedule it armed, by a
 * recurring job's schedule, or by the daily safety-net cron, it loops: a pass (count ready jobs, fan out runner
 * invocations), rescue of expired leases, an `at()` schedule at the earliest
 * running lease's expiry (a runner may die), then the next due job or tick
 * decides (shared/wake-plan.ts): return (nothing queued: no connection until
 * the next enqueue), sleep toward it with the pool closed (and start runners
 * `startLeadMs` early, told to wait for it), arm an EventBridge `at()`
 * schedule ahead of it by its 60 s precision, or hand over to a fresh
 * invocation. One invocation watches at a time (`watchDue`).
 *
 * No Invoke failure ends it in an error: a function Lambda refuses (throttled,
 * missing, a reset, no answer) is asked again after a backoff
 * (shared/invoke-backoff.ts), an `at()` schedule is armed for that retry, and
 * a hand-over that fails falls back to an `at()` schedule; if that fails too,
 * WatchLost says so.
 */

/** While a scheduler stays for queued or running work, it invokes the rescuer (metrics, pruning) this often. */
const RESCUER_EVERY_MS = 60_000;
/** Sleeps longer than this close the pool, so the database sees no connection. */
const CLOSE_POOL_AFTER_MS = 2_000;
/** First wait before asking again for an Invoke that failed (doubling, jittered, to `scheduler.invokeBackoffMaxMs`). */
const INVOKE_RETRY_BASE_MS = 1_000;
/** An AWS call ends at least this long before the invocation's timeout (a hung one included). */
const CALL_RESERVE_MS = 3_000;

export { WAKE_EVENT } from "./waker.ts";

/** A successor started by a scheduler whose time runs out: it takes over that one's watch. */
const relaySchema = z.object({ relayFrom: z.string().min(1).max(100) });

/** A runner invocation that failed (crash, out of memory, timeout), as its on-failure destination delivers it. */
const failureSchema = z.object({
  requestContext: z.object({ functionArn: z.string(), condition: z.string() }),
  requestPayload: z.object({ invocationId: z.string().min(1).max(100).optional() }).optional(),
});

/** A recurring job's tick, as its EventBridge schedule delivers it; any other event is a wake-up. */
const tickSchema = z.object({ source: z.literal("leasehold.recurring"), name: z.string().min(1).max(200), scheduledTime: z.iso.datetime() });

/** Deployed function name of each runner (infra sets the map; locally the config name is the function name). */
function runnerFunction(env: Environment, name: string): string {
  return env.runnerFunctions[name] ?? name;
}

/** Starts one runner invocation (asynchronously); throws when Lambda refuses it. `waitUntil`: started ahead of a due job. */
export type InvokeRunner = (runner: string, invocationId: string, waitUntil?: number) => Promise<unknown>;


/**
 * One look at demand and the fan-out it needs (the shared `schedulePass`).
 * `invoked` counts the invocations Lambda accepted; a refused one is logged
 * and its reservation dropped, and it counts for nothing. `horizonMs` counts
 * jobs coming due that soon as demand; the runners started for them wait
 * until `waitUntil`.
 */
export async function schedulePass(
  app: { config: Config; registry: Registry }, pool: Pool, schemaName: string, invoke: InvokeRunner,
  options: { horizonMs?: number; waitUntil?: number; canStart?: (runnerFunction: string) => boolean } = {},
): Promise<{ ready: number; invoked: number; covered: boolean }> {
  const { config, registry } = app;
  const failed = new Map<string, number>();
  const result = await sharedPass({
    pool,
    schema: schemaName,
    runners: Object.entries(config.runners),
    names: registry.keys(),
    maxRunners: Math.floor(config.connectionBudget / config.connectionsPerRunner),
    horizonMs: options.horizonMs,
    canStart: options.canStart,
    newId: randomUUID,
    invoke: async (name, id) => {
      await invoke(name, id, options.waitUntil);
    },
    onInvokeError: (name) => void failed.set(name, (failed.get(name) ?? 0) + 1),
  });
  const invoked = [...result.invoked.values()].reduce((a, b) => a + b, 0);
  const fields = () => ({ ready: Object.fromEntries(result.ready), invoked: Object.fromEntries(result.invoked), failed: Object.fromEntries(failed) });
  if (invoked > 0) logger.info("runners invoked", fields());
  if (failed.size > 0) logger.warn("runner invokes failed", fields());
  return { ready: result.total, invoked, covered: result.covered };
}

type SchedulerSummary = { passes: number; invoked: number; invokeFailures: number; plan: string };

/** The scheduler's Lambda handler, for the app's job types, recurring jobs and config. */
export function createSchedulerHandler(app: LeaseholdApp): (event: unknown, context: Context) => Promise<SchedulerSummary> {
  const { registry, recurring, config, settings } = resolveApp(app);
  const env = readEnvironment();
  // One attempt per call: the backoff decides when to ask again.
  const lambda = lambdaClient({ maxAttempts: 1 });
  // Kept across the invocations of a warm environment: it remembers a throttle.
  const backoff = new InvokeBackoff({
    baseMs: INVOKE_RETRY_BASE_MS, maxMs: config.scheduler.invokeBackoffMaxMs, now: Date.now, random: Math.random,
  });
  let eventBridge: Promise<SchedulerClient> | undefined;
  let lastRescuerAt = Number.NEGATIVE_INFINITY;
  const schema = () => settings.schema;
  return async (event, context) => {
    logger.addContext(context);
    const parsed = tickSchema.safeParse(event);
    const tick = parsed.success ? parsed.data : null;
    const relay = relaySchema.safeParse(event);
    const relayFrom = relay.success ? relay.data.relayFrom : null;
    const failure = failureSchema.safeParse(event);
    const failedRunner = failure.success ? failure.data.requestPayload?.invocationId : undefined;
    if (failure.success) logger.warn("a runner invocation failed; looking at what it left", { runner: failure.data.requestContext.functionArn, invocationId: failedRunner });
    let relayed = false;
    const served = claimable(config, registry.keys());
    const { pollMs } = config.scheduler;
    const owner = context.awsRequestId;
    const leftMs = () => context.getRemainingTimeInMillis() - SCHEDULER_MARGIN_MS;
    const callMs = () => Math.max(100, Math.min(AWS_CALL_TIMEOUT_MS, context.getRemainingTimeInMillis() - CALL_RESERVE_MS));
    const invokes = schedulerInvokes(lambda, backoff);
    /** Runner functions with demand this pass could not start: backing off, or refused now. */
    let short = new Set<string>();
    const invokeRunner: InvokeRunner = (name, id, waitUntil) =>
      invokes.invoke(name, runnerFunction(env, name), { invocationId: id, waitUntil }, callMs()).catch((err: unknown) => {
        short.add(name);
        throw err;
      });
    const canStart = (fn: string) => invokes.may(fn) || (short.add(fn), false);
    const invokeSuccessor = () => invokes.tryInvoke("scheduler", context.functionName, { ...WAKE_EVENT, relayFrom: owner }, callMs());
    let pool: Pool | null = null;
    const store = () => ({ db: (pool ??= openPool(settings, 2)), schema: schema() });
    let passes = 0;
    let invoked = 0;
    let ahead: { horizonMs: number; waitUntil: number } | undefined;
    let leaseArmedMs: number | null = null;
    /** Arms a one-time schedule that starts a scheduler at `atMs` (up to its precision late); its name, or null when it could not. */
    const arm = async (atMs: number, dueMs: number): Promise<string | null> => {
      const fields = { at: new Date(atMs).toISOString(), due: new Date(dueMs).toISOString() };
      let name: string;
      try {
        if (!env.wakeRoleArn) throw new Error("LEASEHOLD_WAKE_ROLE_ARN is not set: no role to arm an at() schedule with");
        name = await armWake(await (eventBridge ??= schedulerClient()), {
          prefix: env.wakePrefix,
          functionArn: context.invokedFunctionArn.split(":").slice(0, 7).join(":"),
          roleArn: env.wakeRoleArn,
        }, atMs, { ...WAKE_EVENT, armedFor: new Date(dueMs).toISOString() });
      } catch (err) {
        logger.error("wake arm failed", { ...fields, error: String(err) });
        return null;
      }
      logger.info("wake armed", fields);
      return name;
    };
    let retryArmed: { atMs: number; name: string } | null = null;
    /** Schedules armed for a lease or a due time: never deleted (one may share its second, so its name, with the retry's). */
    const kept = new Set<string>();
    /**
     * An at() schedule for the next attempt at what this invocation could
     * not do now, no sooner than `atMs` and not before this invocation's time
     * is up (until then it tries again itself; a scheduler started earlier
     * would only find it watching): if it dies or runs out of time, the
     * schedule starts another. One still to fire at or before it is enough.
     */
    const armRetry = async (atMs: number): Promise<boolean> => {
      const endMs = Date.now() + Math.max(1_000, context.getRemainingTimeInMillis());
      const at = Math.ceil(Math.max(atMs, endMs) / 1000) * 1000;
      if (retryArmed !== null && retryArmed.atMs > Date.now() && retryArmed.atMs <= at) return true;
      const name = await arm(at, at);
      if (name === null) return false;
      retryArmed = { atMs: at, name };
      return true;
    };
    /**
     * Leaving the queue watched otherwise (nothing due, a successor, a
     * schedule for the due time, a live watcher), the retry schedule would
     * only start a second scheduler beside that watch: deleted.
     */
    const disarmRetry = async () => {
      if (retryArmed === null || retryArmed.atMs <= Date.now() || kept.has(retryArmed.name)) return;
      await disarmWake(await (eventBridge ??= schedulerClient()), retryArmed.name)
        .catch((err: unknown) => logger.warn("wake disarm failed", { at: new Date(retryArmed!.atMs).toISOString(), error: String(err) }));
    };
    /** Out of time with work due and no successor yet: hand over, else an at() schedule, else say so. */
    const handOver = async (dueMs: number) => {
      relayed = await invokeSuccessor();
      if (!relayed && !(await armRetry(dueMs))) reportWatchLost({ due: new Date(dueMs).toISOString(), owner });
    };
    let lastDueMs: number | null = null;
    let outOfTime = false;
    let armedDue = false;
    let plan = "idle";
    try {
      if (tick) await enqueueRecurringTick(store(), recurring, tick.name, new Date(tick.scheduledTime));
      // A runner that failed after it started is no supply, whatever its heartbeat still says.
      if (failedRunner) await dropFailedRunner(store(), failedRunner);
      let ticksSeenMs = Date.now();
      for (;;) {
        if (passes > 0 && leftMs() < pollMs) {
          outOfTime = true;
          break;
        }
        // Ticks this invocation slept toward (EventBridge delivers them too, a little later: deduped).
        await enqueueTicksSince(store(), recurring, ticksSeenMs, Date.now());
        ticksSeenMs = Date.now();
        short = new Set();
        const pass = await schedulePass({ config, registry }, store().db as Pool, schema(), invokeRunner, { ...ahead, canStart });
        invokes.publish();
        ahead = undefined;
        invoked += pass.invoked;
        passes++;
        const due = await nextDue(store(), served);
        if (due.leaseExpiresAt && due.leaseExpiresAt <= due.now) {
          const rescued = await rescueExpiredLeases(store());
          reportDeaths(await describeDeaths(store(), rescued.deadIds));
          if (rescued.rescued + rescued.refunded + rescued.dead > 0) continue;
        }
        // Due times on the database's clock, turned into this process's.
        const nowMs = Date.now();
        const local = (d: Date) => nowMs + (d.getTime() - due.now.getTime());
        // A running job's lease is watched by an at() schedule, never by a
        // sleeping scheduler: most leases end in a settle, and sleeping toward
        // each would bill the scheduler for every running job's lease.
        if (due.leaseExpiresAt) {
          const leaseMs = Math.ceil(local(due.leaseExpiresAt) / 1000) * 1000;
          const name = leaseArmedMs === null || leaseArmedMs < nowMs || leaseArmedMs > leaseMs ? await arm(leaseMs, leaseMs) : null;
          if (name !== null) {
            kept.add(name);
            leaseArmedMs = leaseMs;
          }
        }
        // Runners that could not be asked for now are asked again when their
        // backoff ends, by this invocation or, if it is gone, by the at()
        // schedule armed for then.
        const retryMs = short.size > 0 ? Math.min(...[...short].map((fn) => invokes.retryAtMs(fn))) : null;
        if (retryMs !== null) await armRetry(retryMs);
        // Ready jobs in the hands of runners this pass started need no watching:
        // each runner claims after it starts, and one that fails reaches the
        // scheduler through its on-failure destination. An isolated job so
        // costs one short pass. Otherwise (a live runner counted on, runners
        // short) ready jobs are looked at again after pollMs.
        const dueAt = pass.covered ? due.laterAt : due.runAt;
        const lookAgainMs = Math.max(nowMs + pollMs, retryMs ?? 0);
        const jobDueMs = dueAt && Math.max(local(dueAt), pass.ready > 0 && !pass.covered ? lookAgainMs : 0);
        const tickMs = nextRecurringTickMs(recurring, nowMs);
        const dueMs = jobDueMs === null ? tickMs : tickMs === null ? jobDueMs : Math.min(jobDueMs, tickMs);
        lastDueMs = dueMs;
        const next = planWake({ nowMs, dueMs, remainingMs: leftMs() - pollMs, timing: config.wake });
        plan = next.kind;
        // The rescuer (metrics, pruning) every minute while this scheduler stays for work.
        if (next.kind !== "idle" && env.rescuerFunction && Date.now() - lastRescuerAt >= RESCUER_EVERY_MS) {
          lastRescuerAt = Date.now();
          await invokes.tryInvoke("rescuer", env.rescuerFunction, {}, callMs());
        }
        if (next.kind === "idle") break;
        // An at() that could not be armed: this invocation stays, and hands over at its end.
        const dueName = next.kind === "arm" ? await arm(next.atMs, dueMs!) : null;
        if (dueName !== null) {
          kept.add(dueName);
          armedDue = true;
          break;
        }
        if (next.kind === "relay" && !relayed) {
          // The successor starts while this one still watches, and takes over.
          // Refused: an at() schedule for the due time, and the hand-over is tried again next pass.
          relayed = await invokeSuccessor();
          if (!relayed) await armRetry(dueMs!);
        }
        if (next.kind === "relay" && leftMs() < 2 * pollMs) {
          outOfTime = true;
          break;
        }
        if (!(await watchDue(store(), owner, new Date(due.now.getTime() + (dueMs! - nowMs)), leftMs(), relayFrom))) {
          plan = "watched";
          break;
        }
        // Never a busy loop: a due time already passed is looked at again after pollMs.
        const untilMs = next.kind === "sleep" ? next.untilMs : nowMs + pollMs;
        const sleepMs = Math.max(untilMs, nowMs + pollMs) - Date.now();
        if (sleepMs > CLOSE_POOL_AFTER_MS && pool) {
          await closePool(pool as Pool);
          pool = null;
        }
        await new Promise((r) => setTimeout(r, Math.max(0, sleepMs)));
        if (dueMs! > Date.now()) ahead = { horizonMs: config.wake.startLeadMs, waitUntil: dueMs! };
      }
      if (outOfTime && lastDueMs !== null && !relayed) await handOver(lastDueMs);
      if (relayed || armedDue || plan === "idle" || plan === "watched") await disarmRetry();
      // A relayed watch is the successor's to take; any other is let go.
      if (plan !== "watched" && !relayed) await releaseWatch(store(), owner);
    } finally {
      invokes.publish();
      if (pool) await closePool(pool);
    }
    const { accepted, failed } = invokes.totals();
    logger.info("scheduler done", { passes, invoked, invokesAccepted: accepted, invokeFailures: failed, plan, relayed, relayFrom });
    return { passes, invoked, invokeFailures: failed, plan };
  };
}
