/**
 * EventBridge Scheduler, as far as Leasehold uses it: one-time `at()`
 * schedules (deleted after they fire when ActionAfterCompletion is DELETE),
 * `rate()` and `cron()` schedules, each invoking a Lambda target with its
 * Input. Fired with AWS's precision: anywhere in [time, time + precisionMs),
 * 60 s by default, so local runs show the true lateness of a schedule.
 * `<aws.scheduler.scheduled-time>` in an Input is replaced as AWS does.
 */
import { Cron } from "croner";
import { fromAwsCron } from "../../shared/scheduler/aws-cron.ts";
import type { Clock } from "../../shared/runner/clock.ts";
import { parseSchedule } from "./schedule.ts";

export interface ScheduleDefinition {
  Name: string;
  GroupName?: string;
  ScheduleExpression: string;
  ScheduleExpressionTimezone?: string;
  ActionAfterCompletion?: "NONE" | "DELETE";
  State?: "ENABLED" | "DISABLED";
  Target: { Arn: string; RoleArn?: string; Input?: string };
}

export interface SchedulesOptions {
  /** Invokes the target asynchronously. */
  fire(targetArn: string, input: string): void;
  /** How late after its time a schedule may fire: 60 s on AWS. */
  precisionMs?: number;
  /** Where in the precision window: uniformly random (AWS), or always at its end (the worst case). */
  jitter?: "random" | "late";
  /** Each firing is delivered twice (EventBridge's at-least-once delivery, made certain). */
  duplicate?: boolean;
  /**
   * What the schedules' times are read on and their timers run on; default
   * the system's (timers that do not keep the process alive). A test passes
   * one whose pending timers it can bring forward (a job asleep for an hour).
   */
  clock?: Clock;
}

export interface Schedules {
  create(def: ScheduleDefinition): "created" | "conflict";
  get(name: string, group?: string): ScheduleDefinition | undefined;
  delete(name: string, group?: string): boolean;
  list(): ScheduleDefinition[];
  /** Firings so far, by schedule name. */
  fired(): Record<string, number>;
  close(): void;
}

export const AWS_SCHEDULE_PRECISION_MS = 60_000;
/** The longest delay Node's setTimeout keeps (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The system clock, its timers unref'd: a pending schedule never keeps the process alive. */
const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, Math.max(0, ms));
    timer.unref?.();
    return () => clearTimeout(timer);
  },
};

/** The next time (epoch ms) a schedule comes due after `afterMs`, or null when it never will. */
export function nextScheduledTime(def: ScheduleDefinition, afterMs: number, createdMs: number): number | null {
  const expression = def.ScheduleExpression.trim();
  const at = /^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$/.exec(expression);
  if (at) {
    const ms = Date.parse(`${at[1]}Z`);
    return ms > afterMs || afterMs === createdMs ? ms : null;
  }
  if (expression.startsWith("rate(")) {
    const { intervalMs } = parseSchedule(expression);
    return createdMs + (Math.floor((afterMs - createdMs) / intervalMs) + 1) * intervalMs;
  }
  const cron = new Cron(fromAwsCron(expression), { timezone: def.ScheduleExpressionTimezone ?? "UTC", paused: true });
  return cron.nextRun(new Date(afterMs))?.getTime() ?? null;
}

export function validateDefinition(def: ScheduleDefinition): string | undefined {
  if (!/^[0-9a-zA-Z\-_.]{1,64}$/.test(def.Name ?? "")) return "Name must be 1-64 of [0-9a-zA-Z-_.]";
  if (!def.Target?.Arn) return "Target.Arn is required";
  try {
    nextScheduledTime(def, Date.now(), Date.now());
  } catch (err) {
    return `Invalid Schedule Expression ${def.ScheduleExpression}: ${(err as Error).message}`;
  }
  return undefined;
}

export function createSchedules(options: SchedulesOptions): Schedules {
  const precisionMs = options.precisionMs ?? AWS_SCHEDULE_PRECISION_MS;
  const clock = options.clock ?? systemClock;
  const entries = new Map<string, { def: ScheduleDefinition; cancel?: () => void }>();
  const fired: Record<string, number> = {};
  const key = (name: string, group = "default") => `${group}/${name}`;

  function arm(k: string, afterMs: number, createdMs: number): void {
    const entry = entries.get(k);
    if (!entry || entry.def.State === "DISABLED") return;
    const dueMs = nextScheduledTime(entry.def, afterMs, createdMs);
    if (dueMs === null) return void entries.delete(k);
    const lateMs = options.jitter === "late" ? precisionMs - 1 : Math.floor(Math.random() * precisionMs);
    const delayMs = Math.max(0, dueMs - clock.now()) + lateMs;
    if (delayMs > MAX_TIMER_MS) {
      // Node fires a longer timer at once: wait in steps instead (a schedule weeks away).
      entry.cancel = clock.after(MAX_TIMER_MS, () => arm(k, afterMs, createdMs));
      return;
    }
    entry.cancel = clock.after(delayMs, () => {
      const input = (entry.def.Target.Input ?? "{}").replaceAll("<aws.scheduler.scheduled-time>", new Date(dueMs).toISOString().replace(/\.\d{3}Z$/, "Z"));
      fired[entry.def.Name] = (fired[entry.def.Name] ?? 0) + 1;
      options.fire(entry.def.Target.Arn, input);
      if (options.duplicate) options.fire(entry.def.Target.Arn, input);
      const oneTime = entry.def.ScheduleExpression.startsWith("at(");
      if (oneTime && entry.def.ActionAfterCompletion === "DELETE") entries.delete(k);
      else if (!oneTime) arm(k, dueMs, createdMs);
    });
  }

  return {
    create(def) {
      const k = key(def.Name, def.GroupName);
      if (entries.has(k)) return "conflict";
      const now = clock.now();
      entries.set(k, { def: { ...def, State: def.State ?? "ENABLED" } });
      arm(k, now, now);
      return "created";
    },
    get: (name, group) => entries.get(key(name, group))?.def,
    delete(name, group) {
      const entry = entries.get(key(name, group));
      entry?.cancel?.();
      return entries.delete(key(name, group));
    },
    list: () => [...entries.values()].map((e) => e.def),
    fired: () => ({ ...fired }),
    close() {
      for (const entry of entries.values()) entry.cancel?.();
      entries.clear();
    },
  };
}
