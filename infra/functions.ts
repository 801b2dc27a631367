/**
 * The Lambda functions, sized from `functionSpecs(config)`: one runner per
 * `config.runners` entry (and its light variant, if it has one), the
 * scheduler, the rescuer and the API, each built
 * from its generated entry (the app's jobs and config). Their safety-net
 * crons are made here too; the wake role and the recurring jobs' schedules
 * come from infra/wake.ts.
 */
import { functionSpecs, runnerFunctions, type FunctionSpec } from "../shared/settings/function-specs.ts";
import { writeEnvironment } from "../shared/settings/environment.ts";
import { METRICS_NAMESPACE, SERVICE_NAME } from "../shared/observe/metrics-names.ts";
import { componentName, type InfraContext } from "./context.ts";
import { parseSchedule } from "./schedule.ts";
import { createWake, type Wake } from "./wake.ts";

interface Extra {
  link?: unknown[];
  environment?: Record<string, $util.Input<string>>;
  retries?: number;
  concurrency?: { reserved: number };
  url?: boolean;
  permissions?: { actions: string[]; resources: $util.Input<string>[] }[];
  /** A fixed function name, for functions others refer to by name. */
  functionName?: string;
}

type ScheduleExpression = `rate(${string})` | `cron(${string})`;

function expression(text: string): ScheduleExpression {
  parseSchedule(text); // throws with the reason on a bad expression
  return text as ScheduleExpression;
}

export interface Functions {
  runners: Record<string, sst.aws.Function>;
  rescuer: sst.aws.Function;
  scheduler: sst.aws.Function;
  api: sst.aws.Function;
  wake: Wake;
  armWakes: { actions: string[]; resources: $util.Input<string>[] }[];
  wakePolicy: aws.iam.RolePolicy;
  recurringSchedules: aws.scheduler.Schedule[];
  schedulerCron: sst.aws.CronV2;
  rescuerCron: sst.aws.CronV2;
  runnerFailures: aws.lambda.FunctionEventInvokeConfig[];
}

export function createFunctions(ctx: InfraContext, migration: aws.lambda.Invocation): Functions {
  const specs = new Map<string, FunctionSpec>();
  for (const spec of functionSpecs(ctx.config)) {
    if (specs.has(spec.name)) throw new Error(`two functions are named "${spec.name}": rename the runner`);
    specs.set(spec.name, spec);
  }
  const wake = createWake(ctx);

  function leaseholdFunction(name: string, handler: string, extra: Extra = {}): sst.aws.Function {
    const s = specs.get(name)!;
    return new sst.aws.Function(ctx.child(componentName(name)), {
      handler,
      runtime: "nodejs22.x",
      // What a function imports dynamically (the AWS SDK, loaded on first use) goes in chunks of its own: a cold start does not compile it.
      nodejs: { splitting: true },
      timeout: `${s.timeoutSeconds} seconds`,
      memory: `${s.memoryMb} MB`,
      link: [ctx.databaseUrl, ...(extra.link ?? [])],
      environment: {
        POWERTOOLS_SERVICE_NAME: SERVICE_NAME,
        POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
        // One schema for every function (shared/settings/settings.ts), from the app's config.
        ...writeEnvironment({ schema: ctx.config.schema }),
        ...s.environment,
        ...extra.environment,
      },
      retries: extra.retries,
      concurrency: extra.concurrency,
      url: extra.url,
      permissions: extra.permissions,
      transform: {
        // New code goes live only after this deploy's migrations ran.
        function: (args: { name?: $util.Input<string> }, opts: { dependsOn?: unknown }) => {
          if (extra.functionName) args.name = extra.functionName;
          opts.dependsOn = [migration];
        },
      },
    });
  }

  /** The one-time `at()` schedules, by their name prefix (functions/aws.ts names them `<prefix>-<epoch seconds>`, default group). */
  const wakeSchedules = `arn:aws:scheduler:*:*:schedule/default/${wake.wakePrefix}-*`;
  /** Arming a one-time `at()` wake-up: create the schedule, and hand it the role that invokes the scheduler. */
  const armWakes = [
    { actions: ["scheduler:CreateSchedule"], resources: [wakeSchedules] },
    { actions: ["iam:PassRole"], resources: [wake.wakeRole.arn] },
  ];
  const schedulerArnByName = `arn:aws:lambda:*:*:function:${wake.schedulerFunctionName}`;

  /** Runner functions by function name: each config.runners key, and `<key>-light` for a light variant. */
  const runners: Record<string, sst.aws.Function> = Object.fromEntries(
    runnerFunctions(ctx.config).map((runner) => [
      runner.name,
      leaseholdFunction(runner.name, ctx.handlers.runner, {
        // No async retries (a retry would only start a second runner), and a
        // failed invocation wakes the scheduler: see `runnerFailures` below.
        // The hard cap on concurrent invocations of this runner.
        concurrency: { reserved: runner.maxConcurrency },
        // A follow-up job for another queue, or for later, wakes the scheduler.
        environment: writeEnvironment({ schedulerFunction: wake.schedulerFunctionName }),
        permissions: [{ actions: ["lambda:InvokeFunction"], resources: [schedulerArnByName] }],
      }),
    ]),
  );

  const rescuer = leaseholdFunction("rescuer", ctx.handlers.rescuer, { retries: 0 });

  const scheduler = leaseholdFunction("scheduler", ctx.handlers.scheduler, {
    retries: 0,
    functionName: wake.schedulerFunctionName,
    // Linking a function grants lambda:InvokeFunction on it: the runners, the
    // rescuer (invoked while jobs run), and itself (a successor, by name).
    link: [...Object.values(runners), rescuer],
    permissions: [
      ...armWakes,
      // Deletes the retry schedule it armed once it leaves another watch (functions/scheduler.ts).
      { actions: ["scheduler:DeleteSchedule"], resources: [wakeSchedules] },
      { actions: ["lambda:InvokeFunction"], resources: [schedulerArnByName] },
    ],
    environment: writeEnvironment<$util.Input<string>>({
      runnerFunctions: $jsonStringify(Object.fromEntries(Object.entries(runners).map(([name, fn]) => [name, fn.name]))),
      rescuerFunction: rescuer.name,
      wakeRoleArn: wake.wakeRole.arn,
      wakePrefix: wake.wakePrefix,
    }),
  });

  /**
   * A runner invocation that fails (a crash, an out-of-memory kill, a
   * timeout) is not retried, and goes to its on-failure destination, the
   * scheduler (`FunctionSpec.onFailure`): woken, it watches the leases the
   * runner left. This is what lets a scheduler that started runners for every
   * ready job return at once. One config per function: it replaces SST's own
   * (`retries`), which has no destination.
   */
  const runnerFailures = Object.keys(runners).map((name) => {
    if (specs.get(name)?.onFailure !== "scheduler") throw new Error(`runner ${name}: on-failure destination must be the scheduler`);
    return new aws.lambda.FunctionEventInvokeConfig(ctx.child(`${componentName(name)}OnFailure`), {
      functionName: runners[name]!.name,
      maximumRetryAttempts: 0,
      destinationConfig: { onFailure: { destination: scheduler.arn } },
    });
  });

  const wakePolicy = wake.allowWakes(scheduler.arn);
  const recurringSchedules = wake.recurringSchedules(scheduler.arn);

  const api = leaseholdFunction("api", ctx.handlers.api, {
    // Linked to the scheduler so an enqueue can wake it right after commit,
    // and allowed to arm an at() schedule when that Invoke is slow.
    link: [ctx.apiToken, scheduler],
    permissions: armWakes,
    environment: writeEnvironment<$util.Input<string>>({
      schedulerFunction: scheduler.name,
      schedulerArn: scheduler.arn,
      wakeRoleArn: wake.wakeRole.arn,
      wakePrefix: wake.wakePrefix,
    }),
    url: true,
  });

  // The safety nets: enqueues, runners and armed schedules wake the scheduler.
  const schedulerCron = new sst.aws.CronV2(ctx.child("SchedulerCron"), { function: scheduler, schedule: expression(ctx.config.scheduler.schedule) });
  const rescuerCron = new sst.aws.CronV2(ctx.child("RescuerCron"), { function: rescuer, schedule: expression(ctx.config.rescuer.schedule) });

  return { runners, rescuer, scheduler, api, wake, armWakes, wakePolicy, recurringSchedules, schedulerCron, rescuerCron, runnerFailures };
}
