import type { SchedulerClient } from "@aws-sdk/client-scheduler";
import type { LambdaClient } from "@aws-sdk/client-lambda";
import type { Context } from "aws-lambda";
import type { Pool } from "../shared/db/db.ts";
import { describeDeaths } from "../shared/observe/deaths.ts";
import { nextDue, releaseWatch, watchDue } from "../shared/scheduler/due.ts";
import type { Environment } from "../shared/settings/environment.ts";
import { dropFailedRunner } from "../shared/scheduler/fleet.ts";
import type { InvokeBackoff } from "../shared/scheduler/invoke-backoff.ts";
import { rescueExpiredLeases } from "../shared/lifecycle/rescue.ts";
import { claimable } from "../shared/settings/serving.ts";
import { planWake, SCHEDULER_MARGIN_MS } from "../shared/scheduler/wake-plan.ts";
import type { ResolvedApp } from "./app.ts";
import { AWS_CALL_TIMEOUT_MS } from "./aws.ts";
import { closePool, openPool } from "./env.ts";
import { logger, reportDeaths } from "./observability.ts";
import { enqueueRecurringTick, enqueueTicksSince, nextRecurringTickMs } from "./recurring-tick.ts";
import { reportWatchLost, schedulerInvokes, type SchedulerInvokes } from "./scheduler-invokes.ts";
import { runnerFunction, schedulePass, type InvokeRunner } from "./scheduler-pass.ts";
import { wakeSchedules, type WakeSchedules } from "./scheduler-wakes.ts";
import { WAKE_EVENT } from "./waker.ts";

/** While a scheduler stays for queued or running work, it invokes the rescuer (metrics, pruning) this often. */
const RESCUER_EVERY_MS = 60_000;
/** Sleeps longer than this close the pool, so the database sees no connection. */
const CLOSE_POOL_AFTER_MS = 2_000;
/** An AWS call ends at least this long before the invocation's timeout (a hung one included). */
const CALL_RESERVE_MS = 3_000;

/** What a scheduler keeps across the invocations of a warm environment. */
export interface WarmScheduler {
  app: ResolvedApp;
  env: Environment;
  lambda: LambdaClient;
  /** It remembers a throttle. */
  backoff: InvokeBackoff;
  eventBridge: () => Promise<SchedulerClient>;
  lastRescuerAt: number;
}

export type SchedulerSummary = { passes: number; invoked: number; invokeFailures: number; plan: string };

/** What woke this invocation, beside a plain wake-up. */
export interface SchedulerEvent {
  /** A recurring job's tick. */
  tick: { name: string; scheduledTime: string } | null;
  /** The scheduler whose watch this one takes over. */
  relayFrom: string | null;
  /** A runner invocation that failed, by its invocation id. */
  failedRunner: string | undefined;
}

/**
 * One scheduler invocation (see functions/scheduler.ts): passes (count ready
 * jobs, fan out runners), rescues, the lease and due-time schedules, until
 * the wake plan says return, arm, or hand over, or its time is up.
 */
export class SchedulerInvocation {
  private readonly owner: string;
  private readonly served: ReturnType<typeof claimable>;
  private readonly pollMs: number;
  private readonly invokes: SchedulerInvokes;
  private readonly wakes: WakeSchedules;
  /** Runner functions with demand this pass could not start: backing off, or refused now. */
  private short = new Set<string>();
  private pool: Pool | null = null;
  private passes = 0;
  private invoked = 0;
  private ahead: { horizonMs: number; waitUntil: number } | undefined;
  private relayed = false;
  private lastDueMs: number | null = null;
  private outOfTime = false;
  private armedDue = false;
  private plan = "idle";
  private ticksSeenMs = 0;

  constructor(private readonly warm: WarmScheduler, private readonly context: Context, private readonly event: SchedulerEvent) {
    const { config, registry } = warm.app;
    this.served = claimable(config, registry.keys());
    this.pollMs = config.scheduler.pollMs;
    this.owner = context.awsRequestId;
    this.invokes = schedulerInvokes(warm.lambda, warm.backoff);
    this.wakes = wakeSchedules(warm.env, context, warm.eventBridge);
  }

  private leftMs = () => this.context.getRemainingTimeInMillis() - SCHEDULER_MARGIN_MS;
  private callMs = () => Math.max(100, Math.min(AWS_CALL_TIMEOUT_MS, this.context.getRemainingTimeInMillis() - CALL_RESERVE_MS));
  private store = () => ({ db: (this.pool ??= openPool(this.warm.app.settings, 2)), schema: this.warm.app.settings.schema });
  private invokeRunner: InvokeRunner = (name, id, waitUntil) =>
    this.invokes.invoke(name, runnerFunction(this.warm.env, name), { invocationId: id, waitUntil }, this.callMs()).catch((err: unknown) => {
      this.short.add(name);
      throw err;
    });
  private canStart = (fn: string) => this.invokes.may(fn) || (this.short.add(fn), false);
  private invokeSuccessor = () =>
    this.invokes.tryInvoke("scheduler", this.context.functionName, { ...WAKE_EVENT, relayFrom: this.owner }, this.callMs());

  async run(): Promise<SchedulerSummary> {
    const { recurring } = this.warm.app;
    const { tick, failedRunner, relayFrom } = this.event;
    try {
      if (tick) await enqueueRecurringTick(this.store(), recurring, tick.name, new Date(tick.scheduledTime));
      // A runner that failed after it started is no supply, whatever its heartbeat still says.
      if (failedRunner) await dropFailedRunner(this.store(), failedRunner);
      this.ticksSeenMs = Date.now();
      while (await this.pass());
      if (this.outOfTime && this.lastDueMs !== null && !this.relayed) await this.handOver(this.lastDueMs);
      if (this.relayed || this.armedDue || this.plan === "idle" || this.plan === "watched") await this.wakes.disarmRetry();
      // A relayed watch is the successor's to take; any other is let go.
      if (this.plan !== "watched" && !this.relayed) await releaseWatch(this.store(), this.owner);
    } finally {
      this.invokes.publish();
      if (this.pool) await closePool(this.pool);
    }
    const { accepted, failed } = this.invokes.totals();
    const { passes, invoked, plan, relayed } = this;
    logger.info("scheduler done", { passes, invoked, invokesAccepted: accepted, invokeFailures: failed, plan, relayed, relayFrom });
    return { passes, invoked, invokeFailures: failed, plan };
  }

  /** One pass and what follows it; false when this invocation stops looking. */
  private async pass(): Promise<boolean> {
    const { config, registry, recurring } = this.warm.app;
    const { pollMs } = this;
    if (this.passes > 0 && this.leftMs() < pollMs) {
      this.outOfTime = true;
      return false;
    }
    // Ticks this invocation slept toward (EventBridge delivers them too, a little later: deduped).
    await enqueueTicksSince(this.store(), recurring, this.ticksSeenMs, Date.now());
    this.ticksSeenMs = Date.now();
    this.short = new Set();
    const pass = await schedulePass({ config, registry }, this.store().db as Pool, this.store().schema, this.invokeRunner, {
      ...this.ahead, canStart: this.canStart,
    });
    this.invokes.publish();
    this.ahead = undefined;
    this.invoked += pass.invoked;
    this.passes++;
    const due = await nextDue(this.store(), this.served);
    if (due.leaseExpiresAt && due.leaseExpiresAt <= due.now) {
      const rescued = await rescueExpiredLeases(this.store());
      reportDeaths(await describeDeaths(this.store(), rescued.deadIds));
      if (rescued.rescued + rescued.refunded + rescued.dead > 0) return true;
    }
    // Due times on the database's clock, turned into this process's.
    const nowMs = Date.now();
    const local = (d: Date) => nowMs + (d.getTime() - due.now.getTime());
    // A running job's lease is watched by an at() schedule, never by a
    // sleeping scheduler: most leases end in a settle, and sleeping toward
    // each would bill the scheduler for every running job's lease.
    if (due.leaseExpiresAt) await this.wakes.watchLease(Math.ceil(local(due.leaseExpiresAt) / 1000) * 1000, nowMs);
    // Runners that could not be asked for now are asked again when their
    // backoff ends, by this invocation or, if it is gone, by the at()
    // schedule armed for then.
    const retryMs = this.short.size > 0 ? Math.min(...[...this.short].map((fn) => this.invokes.retryAtMs(fn))) : null;
    if (retryMs !== null) await this.wakes.armRetry(retryMs);
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
    this.lastDueMs = dueMs;
    const next = planWake({ nowMs, dueMs, remainingMs: this.leftMs() - pollMs, timing: config.wake });
    this.plan = next.kind;
    // The rescuer (metrics, pruning) every minute while this scheduler stays for work.
    if (next.kind !== "idle" && this.warm.env.rescuerFunction && Date.now() - this.warm.lastRescuerAt >= RESCUER_EVERY_MS) {
      this.warm.lastRescuerAt = Date.now();
      await this.invokes.tryInvoke("rescuer", this.warm.env.rescuerFunction, {}, this.callMs());
    }
    if (next.kind === "idle") return false;
    // An at() that could not be armed: this invocation stays, and hands over at its end.
    if (next.kind === "arm" && (await this.wakes.armDue(next.atMs, dueMs!))) {
      this.armedDue = true;
      return false;
    }
    return this.stay(next, dueMs!, nowMs, due.now);
  }

  /** Stays for the due time `dueMs`: hands over if it must, watches, sleeps toward it; false when it stops. */
  private async stay(next: ReturnType<typeof planWake>, dueMs: number, nowMs: number, dbNow: Date): Promise<boolean> {
    const { pollMs } = this;
    if (next.kind === "relay" && !this.relayed) {
      // The successor starts while this one still watches, and takes over.
      // Refused: an at() schedule for the due time, and the hand-over is tried again next pass.
      this.relayed = await this.invokeSuccessor();
      if (!this.relayed) await this.wakes.armRetry(dueMs);
    }
    if (next.kind === "relay" && this.leftMs() < 2 * pollMs) {
      this.outOfTime = true;
      return false;
    }
    if (!(await watchDue(this.store(), this.owner, new Date(dbNow.getTime() + (dueMs - nowMs)), this.leftMs(), this.event.relayFrom))) {
      this.plan = "watched";
      return false;
    }
    // Never a busy loop: a due time already passed is looked at again after pollMs.
    const untilMs = next.kind === "sleep" ? next.untilMs : nowMs + pollMs;
    const sleepMs = Math.max(untilMs, nowMs + pollMs) - Date.now();
    if (sleepMs > CLOSE_POOL_AFTER_MS && this.pool) {
      await closePool(this.pool);
      this.pool = null;
    }
    await new Promise((r) => setTimeout(r, Math.max(0, sleepMs)));
    if (dueMs > Date.now()) this.ahead = { horizonMs: this.warm.app.config.wake.startLeadMs, waitUntil: dueMs };
    return true;
  }

  /** Out of time with work due and no successor yet: hand over, else an at() schedule, else say so. */
  private async handOver(dueMs: number): Promise<void> {
    this.relayed = await this.invokeSuccessor();
    if (!this.relayed && !(await this.wakes.armRetry(dueMs))) reportWatchLost({ due: new Date(dueMs).toISOString(), owner: this.owner });
  }
}
