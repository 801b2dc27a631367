/**
 * What the scheduler does once nothing is ready: a pure function of the
 * clock, the next due time and the invocation's time left, so every branch
 * is tested without waiting.
 *
 * - `idle`: nothing queued or running. Return; nothing is armed, and no
 *   function opens a connection until an enqueue wakes the system.
 * - `sleep`: the due time falls within this invocation. Close the pool, sleep
 *   until `startLeadMs` before it, then start runners that wait for it.
 * - `arm`: the due time is further off. Arm a one-time EventBridge schedule
 *   `at(...)` early enough that, fired anywhere in its precision window, the
 *   scheduler it starts can still sleep to the due time.
 * - `relay`: due too soon to arm (within the schedule's precision) but too
 *   late for this invocation to sleep to, keeping `armSlackMs` for a
 *   successor to start: invoke the successor now; it takes the watch over
 *   while this one still watches, so no due time falls in the handover.
 */
export type WakePlan =
  | { kind: "idle" }
  | { kind: "sleep"; untilMs: number }
  | { kind: "arm"; atMs: number }
  | { kind: "relay" };

export interface WakeTiming {
  /** How late a schedule may fire after its time: 60 s for EventBridge `at()` and cron. */
  precisionMs: number;
  /** Runners are invoked this long before a due time, so they are claiming when it comes. */
  startLeadMs: number;
  /** Kept for a fired scheduler's own start (cold start, first query). */
  armSlackMs: number;
}

export function planWake(args: { nowMs: number; dueMs: number | null; remainingMs: number; timing: WakeTiming }): WakePlan {
  const { nowMs, dueMs, remainingMs, timing } = args;
  if (dueMs === null) return { kind: "idle" };
  const startAt = dueMs - timing.startLeadMs;
  if (startAt - nowMs <= remainingMs - timing.armSlackMs) return { kind: "sleep", untilMs: Math.max(nowMs, startAt) };
  const armAt = startAt - timing.precisionMs - timing.armSlackMs;
  // at() takes whole seconds; rounding down only makes it earlier.
  if (armAt > nowMs) return { kind: "arm", atMs: Math.floor(armAt / 1000) * 1000 };
  return { kind: "relay" };
}

/** Time a scheduler invocation keeps back at its end (closing, a last slow query). */
export const SCHEDULER_MARGIN_MS = 5_000;

/**
 * The timeout a scheduler needs: fired by an armed schedule as late as its
 * precision allows, it sleeps to the lead before the due time with the slack
 * for a successor still left, polls once, and keeps its margin.
 */
export function schedulerTimeoutNeededMs(timing: WakeTiming, pollMs: number): number {
  return timing.precisionMs + 2 * timing.armSlackMs + timing.startLeadMs + pollMs + SCHEDULER_MARGIN_MS;
}
