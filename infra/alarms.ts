/**
 * CloudWatch alarms from `alarmSpecs(config)`, all notifying one SNS topic.
 * Give the component `alarmEmail` (or set LEASEHOLD_ALARM_EMAIL when
 * deploying) to subscribe an address (AWS emails a confirmation link);
 * without it, subscribe by hand (docs/deploy.md).
 */
import { alarmSpecs } from "./alarm-specs.ts";
import { componentName, type InfraContext } from "./context.ts";

export function createAlarms(
  ctx: InfraContext, runners: Record<string, sst.aws.Function>,
): { alarmTopic: sst.aws.SnsTopic; alarmEmail: aws.sns.TopicSubscription | undefined; alarms: aws.cloudwatch.MetricAlarm[] } {
  const alarmTopic = new sst.aws.SnsTopic(ctx.child("Alarms"));
  const email = ctx.alarmEmail?.trim();
  const alarmEmail = email
    ? new aws.sns.TopicSubscription(ctx.child("AlarmsEmail"), { topic: alarmTopic.arn, protocol: "email", endpoint: email })
    : undefined;

  const alarms = alarmSpecs(ctx.config).map((spec) => {
    const fn = spec.lambdaFunction === undefined ? undefined : runners[spec.lambdaFunction];
    if (spec.lambdaFunction !== undefined && !fn) throw new Error(`alarm ${spec.name}: no runner ${spec.lambdaFunction}`);
    return new aws.cloudwatch.MetricAlarm(ctx.child(`Alarm${componentName(spec.name)}`), {
      name: `${$app.name}-${$app.stage}-${ctx.child(spec.name)}`,
      alarmDescription: spec.description,
      namespace: spec.namespace,
      metricName: spec.metricName,
      dimensions: fn ? { ...spec.dimensions, FunctionName: fn.name } : spec.dimensions,
      statistic: spec.statistic,
      period: spec.period,
      evaluationPeriods: spec.evaluationPeriods,
      threshold: spec.threshold,
      comparisonOperator: spec.comparison,
      treatMissingData: spec.treatMissingData,
      alarmActions: [alarmTopic.arn],
      okActions: [alarmTopic.arn],
    });
  });
  return { alarmTopic, alarmEmail, alarms };
}
