import type { Pool, Store } from "../shared/db/db.ts";
import { enqueueTick, latestTick, nextTick, type RecurringJob, type TickResult } from "../shared/jobs/recurring.ts";
import { logger } from "./observability.ts";

/** A tick delivered by a recurring job's EventBridge schedule (its `<aws.scheduler.scheduled-time>`). */
export async function enqueueRecurringTick(
  store: Store, recurring: readonly RecurringJob[], name: string, tickAt: Date,
): Promise<TickResult | "unknown"> {
  const job = recurring.find((r) => r.name === name);
  if (!job) {
    logger.warn("tick of an unknown recurring job", { name });
    return "unknown";
  }
  const result = await enqueueTick(store.db as Pool, store.schema, job, tickAt);
  logger.info("recurring tick", { name, tickAt: tickAt.toISOString(), result });
  return result;
}

/** Enqueues each recurring job's latest tick in (sinceMs, nowMs], as the scheduler passes it. */
export async function enqueueTicksSince(store: Store, recurring: readonly RecurringJob[], sinceMs: number, nowMs: number): Promise<void> {
  for (const job of recurring) {
    const tick = latestTick(job, sinceMs, nowMs);
    if (tick) await enqueueRecurringTick(store, recurring, job.name, tick);
  }
}

/** The next tick of any recurring job after `afterMs`, in epoch ms, or null. */
export function nextRecurringTickMs(recurring: readonly RecurringJob[], afterMs: number): number | null {
  const ticks = recurring.map((job) => nextTick(job, afterMs)?.getTime()).filter((t): t is number => t !== undefined);
  return ticks.length === 0 ? null : Math.min(...ticks);
}
