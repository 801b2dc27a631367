/**
 * CloudWatch alarms from `alarmSpecs(config)`, all notifying one SNS topic.
 * Set LEASEHOLD_ALARM_EMAIL when deploying to subscribe an address (AWS
 * emails a confirmation link); without it, subscribe by hand (docs/deploy.md).
 */
import { config } from "../shared/config.ts";
import { alarmSpecs } from "./alarm-specs.ts";
import { componentName, runners } from "./functions.ts";

export const alarmTopic = new sst.aws.SnsTopic("Alarms");

const email = process.env.LEASEHOLD_ALARM_EMAIL?.trim();
export const alarmEmail = email
  ? new aws.sns.TopicSubscription("AlarmsEmail", {
      topic: alarmTopic.arn,
      protocol: "email",
      endpoint: email,
    })
  : undefined;

export const alarms = alarmSpecs(config).map((spec) => {
  const fn = spec.lambdaFunction === undefined ? undefined : runners[spec.lambdaFunction];
  if (spec.lambdaFunction !== undefined && !fn) throw new Error(`alarm ${spec.name}: no runner ${spec.lambdaFunction}`);
  return new aws.cloudwatch.MetricAlarm(`Alarm${componentName(spec.name)}`, {
    name: `${$app.name}-${$app.stage}-${spec.name}`,
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
