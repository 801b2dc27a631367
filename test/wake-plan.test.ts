import { describe, expect, it } from "vitest";
import { planWake } from "../shared/scheduler/wake-plan.ts";
import { fromAwsCron, toAwsCron } from "../shared/scheduler/aws-cron.ts";
import { createSchedules, nextScheduledTime } from "../dev/lambda/eventbridge.ts";
import { ManualClock } from "./support/clock.ts";

const timing = { precisionMs: 60_000, startLeadMs: 2_000, armSlackMs: 3_000 };
const now = Date.parse("2026-12-01T12:00:00Z");

describe("what the scheduler does once nothing is ready", () => {
  it("returns, arming nothing, when nothing is queued or running", () => {
    expect(planWake({ nowMs: now, dueMs: null, remainingMs: 80_000, timing })).toEqual({ kind: "idle" });
  });

  it("sleeps to the lead before a due time it can reach, keeping slack for a successor", () => {
    expect(planWake({ nowMs: now, dueMs: now + 30_000, remainingMs: 80_000, timing })).toEqual({ kind: "sleep", untilMs: now + 28_000 });
    expect(planWake({ nowMs: now, dueMs: now - 5_000, remainingMs: 80_000, timing })).toEqual({ kind: "sleep", untilMs: now });
  });

  it("arms an at() schedule early by the precision and the slack, in whole seconds, for a due time beyond its reach", () => {
    const plan = planWake({ nowMs: now, dueMs: now + 5 * 60_000 + 500, remainingMs: 80_000, timing });
    expect(plan).toEqual({ kind: "arm", atMs: now + 5 * 60_000 - 2_000 - 60_000 - 3_000 });
  });

  it("hands over to a successor when the due time is too near to arm but beyond this invocation", () => {
    expect(planWake({ nowMs: now, dueMs: now + 40_000, remainingMs: 20_000, timing })).toEqual({ kind: "relay" });
  });
});

describe("cron expressions between croner and EventBridge", () => {
  it("turns day-of-week numbering and the ? rule into EventBridge's, and back", () => {
    expect(toAwsCron("0 9 * * 1-5")).toBe("cron(0 9 ? * 2-6 *)");
    expect(toAwsCron("30 2 1 * *")).toBe("cron(30 2 1 * ? *)");
    expect(fromAwsCron("cron(0 9 ? * 2-6 *)")).toBe("0 9 * * 1-5");
  });

  it("refuses what EventBridge cannot express", () => {
    expect(() => toAwsCron("0 9 1 * 1")).toThrow(/both day-of-month and day-of-week/);
    expect(() => toAwsCron("15 * * * * *")).toThrow(/minute precision/);
  });

  it("finds the next firing of an at(), a rate() and a cron() in its time zone, as the local Scheduler fires them", () => {
    const at = { Name: "a", ScheduleExpression: "at(2026-12-01T12:05:00)", Target: { Arn: "x" } };
    expect(nextScheduledTime(at, now, now)).toBe(now + 5 * 60_000);
    expect(nextScheduledTime(at, now + 5 * 60_000, now)).toBeNull();
    const rate = { Name: "r", ScheduleExpression: "rate(1 day)", Target: { Arn: "x" } };
    expect(nextScheduledTime(rate, now + 1, now)).toBe(now + 86_400_000);
    const cron = { Name: "c", ScheduleExpression: "cron(0 9 ? * 2-6 *)", ScheduleExpressionTimezone: "Europe/Paris", Target: { Arn: "x" } };
    expect(new Date(nextScheduledTime(cron, now, now)!).toISOString()).toBe("2026-12-02T08:00:00.000Z");
  });
});

/** Node's timers: a delay past 2^31 - 1 ms overflows and fires after 1 ms. */
class NodeTimerClock extends ManualClock {
  override after(ms: number, fn: () => void): () => void {
    return super.after(ms > 2_147_483_647 ? 1 : ms, fn);
  }
}

describe("the local EventBridge Scheduler", () => {
  it("fires a one-time schedule weeks away at its time, not at once (Node's timers overflow after 24.8 days)", async () => {
    const clock = new NodeTimerClock();
    const fired: string[] = [];
    const schedules = createSchedules({ fire: (arn) => fired.push(arn), precisionMs: 10, clock });
    const at = (ms: number) => new Date(clock.now() + ms).toISOString().slice(0, 19);
    schedules.create({ Name: "far", ScheduleExpression: `at(${at(40 * 86_400_000)})`, ActionAfterCompletion: "DELETE", Target: { Arn: "far" } });
    schedules.create({ Name: "near", ScheduleExpression: `at(${at(1_000)})`, ActionAfterCompletion: "DELETE", Target: { Arn: "near" } });
    await clock.advance(1_200);
    expect(fired).toEqual(["near"]);
    expect(schedules.list().map((d) => d.Name)).toEqual(["far"]);
    await clock.advance(40 * 86_400_000 - 1_300);
    expect(fired).toEqual(["near"]);
    await clock.advance(200);
    expect(fired).toEqual(["near", "far"]);
    schedules.close();
  });
});
