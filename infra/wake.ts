/**
 * What wakes the scheduler besides an enqueue: the role EventBridge Scheduler
 * assumes to invoke it (for the one-time `at()` schedules the scheduler and
 * the API arm, see shared/wake-plan.ts), and one EventBridge schedule per
 * recurring job (jobs/index.ts `recurring`), each delivering its tick time.
 */
import { recurring } from "../jobs/index.ts";
import { toAwsCron } from "../shared/aws-cron.ts";

/** Names of the one-time schedules: `<prefix>-<epoch seconds>`, one prefix per stage. */
export const wakePrefix = `leasehold-${$app.stage}-wake`;
/** The scheduler's function name, fixed so runners can be allowed to invoke it without a cycle. */
export const schedulerFunctionName = `${$app.name}-${$app.stage}-Scheduler`.slice(0, 64);

export const wakeRole = new aws.iam.Role("WakeRole", {
  assumeRolePolicy: JSON.stringify({
    Version: "2012-10-17",
    Statement: [{ Effect: "Allow", Principal: { Service: "scheduler.amazonaws.com" }, Action: "sts:AssumeRole" }],
  }),
});

/** Lets EventBridge Scheduler invoke the scheduler; a policy of its own, so the role does not wait for the function. */
export function allowWakes(schedulerArn: $util.Input<string>): aws.iam.RolePolicy {
  return new aws.iam.RolePolicy("WakeRoleInvoke", {
    role: wakeRole.id,
    policy: $jsonStringify({
      Version: "2012-10-17",
      Statement: [{ Effect: "Allow", Action: "lambda:InvokeFunction", Resource: schedulerArn }],
    }),
  });
}

/** One EventBridge schedule per recurring job, in its time zone, delivering `<aws.scheduler.scheduled-time>` as the tick. */
export function recurringSchedules(schedulerArn: $util.Input<string>): aws.scheduler.Schedule[] {
  return recurring.map((job) =>
    new aws.scheduler.Schedule(`Recurring${job.name.replace(/[^A-Za-z0-9]/g, "")}`, {
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
}
