/**
 * EventBridge Scheduler crons for the scheduler and the rescuer, on the
 * schedules in config (validated by infra/schedule.ts before anything is made).
 */
import { config } from "../shared/config.ts";
import { rescuer, scheduler } from "./functions.ts";
import { parseSchedule } from "./schedule.ts";

type ScheduleExpression = `rate(${string})` | `cron(${string})`;

function expression(text: string): ScheduleExpression {
  parseSchedule(text); // throws with the reason on a bad expression
  return text as ScheduleExpression;
}

export const schedulerCron = new sst.aws.CronV2("SchedulerCron", {
  function: scheduler,
  schedule: expression(config.scheduler.schedule),
});

export const rescuerCron = new sst.aws.CronV2("RescuerCron", {
  function: rescuer,
  schedule: expression(config.rescuer.schedule),
});
