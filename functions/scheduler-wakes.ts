import type { SchedulerClient } from "@aws-sdk/client-scheduler";
import type { Context } from "aws-lambda";
import type { Environment } from "../shared/settings/environment.ts";
import { armWake, disarmWake } from "./aws.ts";
import { logger } from "./observability.ts";
import { WAKE_EVENT } from "./waker.ts";

/**
 * The one-time EventBridge `at()` schedules one scheduler invocation arms:
 * at a running lease's expiry (a runner may die), at a due time it will not
 * stay for, and for a retry of what it could not do now. Schedules armed
 * for a lease or a due time are kept (never deleted: one may share its
 * second, so its name, with the retry's); the retry's is deleted once the
 * queue is watched otherwise.
 */
export interface WakeSchedules {
  /** Arms a schedule that starts a scheduler at `atMs` (up to its precision late); its name, or null when it could not. */
  arm(atMs: number, dueMs: number): Promise<string | null>;
  /** Arms one for the due time `dueMs` at `atMs`, kept; whether it was armed. */
  armDue(atMs: number, dueMs: number): Promise<boolean>;
  /** Watches the earliest running lease, ending at `leaseMs`: armed unless one already fires by then and after `nowMs`. */
  watchLease(leaseMs: number, nowMs: number): Promise<void>;
  /**
   * An at() schedule for the next attempt at what this invocation could
   * not do now, no sooner than `atMs` and not before this invocation's time
   * is up (until then it tries again itself; a scheduler started earlier
   * would only find it watching): if it dies or runs out of time, the
   * schedule starts another. One still to fire at or before it is enough.
   */
  armRetry(atMs: number): Promise<boolean>;
  /**
   * Leaving the queue watched otherwise (nothing due, a successor, a
   * schedule for the due time, a live watcher), the retry schedule would
   * only start a second scheduler beside that watch: deleted.
   */
  disarmRetry(): Promise<void>;
}

export function wakeSchedules(env: Environment, context: Context, client: () => Promise<SchedulerClient>): WakeSchedules {
  let retryArmed: { atMs: number; name: string } | null = null;
  let leaseArmedMs: number | null = null;
  const kept = new Set<string>();
  const arm = async (atMs: number, dueMs: number): Promise<string | null> => {
    const fields = { at: new Date(atMs).toISOString(), due: new Date(dueMs).toISOString() };
    let name: string;
    try {
      if (!env.wakeRoleArn) throw new Error("LEASEHOLD_WAKE_ROLE_ARN is not set: no role to arm an at() schedule with");
      name = await armWake(await client(), {
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
  return {
    arm,
    async armDue(atMs, dueMs) {
      const name = await arm(atMs, dueMs);
      if (name !== null) kept.add(name);
      return name !== null;
    },
    async watchLease(leaseMs, nowMs) {
      const name = leaseArmedMs === null || leaseArmedMs < nowMs || leaseArmedMs > leaseMs ? await arm(leaseMs, leaseMs) : null;
      if (name !== null) {
        kept.add(name);
        leaseArmedMs = leaseMs;
      }
    },
    async armRetry(atMs) {
      const endMs = Date.now() + Math.max(1_000, context.getRemainingTimeInMillis());
      const at = Math.ceil(Math.max(atMs, endMs) / 1000) * 1000;
      if (retryArmed !== null && retryArmed.atMs > Date.now() && retryArmed.atMs <= at) return true;
      const name = await arm(at, at);
      if (name === null) return false;
      retryArmed = { atMs: at, name };
      return true;
    },
    async disarmRetry() {
      if (retryArmed === null || retryArmed.atMs <= Date.now() || kept.has(retryArmed.name)) return;
      const armed = retryArmed;
      await disarmWake(await client(), armed.name)
        .catch((err: unknown) => logger.warn("wake disarm failed", { at: new Date(armed.atMs).toISOString(), error: String(err) }));
    },
  };
}
