/**
 * What wakes the scheduler besides an enqueue: the role EventBridge Scheduler
 * assumes to invoke it (for the one-time `at()` schedules the scheduler and
 * the API arm, see shared/scheduler/wake-plan.ts), and one EventBridge schedule per
 * recurring job (the app's `recurring`), each delivering its tick time.
 */
import { toAwsCron } from "../shared/scheduler/aws-cron.ts";
import { schedulerFunctionName as deployedSchedulerName } from "../shared/settings/deployed.ts";
import type { InfraContext } from "./context.ts";

export interface Wake {
  wakePrefix: string;
  schedulerFunctionName: string;
  wakeRole: aws.iam.Role;
  allowWakes(schedulerArn: $util.Input<string>): aws.iam.RolePolicy;
  recurringSchedules(schedulerArn: $util.Input<string>): aws.scheduler.Schedule[];
}

export function createWake(ctx: InfraContext): Wake {
  /** Names of the one-time schedules: `<prefix>-<epoch seconds>`, one prefix per stage. */
  const wakePrefix = `leasehold-${$app.stage}-${ctx.child("Wake").toLowerCase()}`.slice(0, 40);
  /** The scheduler's function name, fixed so runners can be allowed to invoke it without a cycle (and the CLI finds it by stage). */
  const schedulerFunctionName = deployedSchedulerName({ app: $app.name, stage: $app.stage, component: ctx.name });

  const wakeRole = new aws.iam.Role(ctx.child("WakeRole"), {
    assumeRolePolicy: JSON.stringify({
      Version: "2012-10-17",
      Statement: [{ Effect: "Allow", Principal: { Service: "scheduler.amazonaws.com" }, Action: "sts:AssumeRole" }],
    }),
  });

  /** Lets EventBridge Scheduler invoke the scheduler; a policy of its own, so the role does not wait for the function. */
  const allowWakes = (schedulerArn: $util.Input<string>) =>
    new aws.iam.RolePolicy(ctx.child("WakeRoleInvoke"), {
      role: wakeRole.id,
      policy: $jsonStringify({
        Version: "2012-10-17",
        Statement: [{ Effect: "Allow", Action: "lambda:InvokeFunction", Resource: schedulerArn }],
      }),
    });

  /** One EventBridge schedule per recurring job, in its time zone, delivering `<aws.scheduler.scheduled-time>` as the tick. */
  const recurringSchedules = (schedulerArn: $util.Input<string>) =>
    ctx.recurring.map((job) =>
      new aws.scheduler.Schedule(ctx.child(`Recurring${job.name.replace(/[^A-Za-z0-9]/g, "")}`), {
        scheduleExpression: toAwsCron(job.cron),
        scheduleExpressionTimezone: job.timeZone,
        flexibleTimeWindow: { mode: "OFF" },
        target: {
          arn: schedulerArn,
          roleArn: wakeRole.arn,
          input: JSON.stringify({ source: "leasehold.recurring", name: job.name, scheduledTime: "<aws.scheduler.scheduled-time>" }),
          retryPolicy: { maximumRetryAttempts: 3, maximumEventAgeInSeconds: 3600 },
        },
      }),
    );

  return { wakePrefix, schedulerFunctionName, wakeRole, allowWakes, recurringSchedules };
}
