/**
 * Stand-ins for the SST globals (`sst`, `aws`, `$app`, ...) that record
 * every resource a config creates, so an sst.config.ts `run()` can be
 * executed without AWS and its arguments checked.
 */
export interface Created {
  type: string;
  name: string;
  args: any;
  opts?: any;
}

class FakeOutput<T> {
  constructor(readonly value: T) {}
  apply<U>(fn: (value: T) => U): FakeOutput<U> {
    return new FakeOutput(fn(this.value));
  }
}

export function installFakeGlobals(created: Created[], root: string, app = { name: "leasehold", stage: "test" }): void {
  const resource = (type: string, props: (name: string, args: any) => object = () => ({})) =>
    class {
      constructor(name: string, args: any, opts?: any) {
        created.push({ type, name, args, opts });
        Object.assign(this, props(name, args));
      }
    };
  const g = globalThis as any;
  g.$config = (input: unknown) => input;
  g.$app = app;
  g.$cli = { paths: { root } };
  g.$jsonStringify = (value: unknown) => JSON.stringify(value);
  g.$interpolate = (strings: TemplateStringsArray, ...values: unknown[]) =>
    strings.reduce((text, part, i) => text + part + (i < values.length ? String(values[i]) : ""), "");
  g.sst = {
    Linkable: resource("sst.Linkable", (name) => ({ name })),
    Secret: resource("sst.Secret", (name) => ({ name, value: new FakeOutput(`value-of-${name}`) })),
    aws: {
      Function: resource("sst.aws.Function", (name) => ({
        name: `fn-${name}`,
        arn: `arn:fn-${name}`,
        url: `https://${name}.example`,
      })),
      CronV2: resource("sst.aws.CronV2"),
      SnsTopic: resource("sst.aws.SnsTopic", (name) => ({ arn: `arn:topic-${name}` })),
      permission: (input: object) => ({ type: "aws.permission", ...input }),
    },
  };
  g.aws = {
    getRegionOutput: () => ({ region: "us-east-1" }),
    iam: {
      Role: resource("aws.iam.Role", (name) => ({ arn: `arn:role-${name}`, id: `role-${name}` })),
      RolePolicy: resource("aws.iam.RolePolicy"),
    },
    scheduler: { Schedule: resource("aws.scheduler.Schedule") },
    lambda: { Invocation: resource("aws.lambda.Invocation"), FunctionEventInvokeConfig: resource("aws.lambda.FunctionEventInvokeConfig") },
    sns: { TopicSubscription: resource("aws.sns.TopicSubscription") },
    cloudwatch: {
      MetricAlarm: resource("aws.cloudwatch.MetricAlarm"),
      Dashboard: resource("aws.cloudwatch.Dashboard", (_name, args) => ({ dashboardName: args.dashboardName })),
    },
  };
}

