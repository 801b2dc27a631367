/**
 * The Lambda functions, sized from `functionSpecs(config)`: one runner per
 * `config.runners` entry (and its light variant, if it has one), the
 * scheduler, the rescuer and the API.
 * Their safety-net crons are in `infra/crons.ts`; the wake role and the
 * recurring jobs' schedules in `infra/wake.ts`.
 */
import { config, functionSpecs, runnerFunctions, type FunctionSpec } from "../shared/config.ts";
import { METRICS_NAMESPACE, SERVICE_NAME } from "../shared/metrics-names.ts";
import { migration } from "./migrate.ts";
import { apiToken, databaseUrl } from "./secrets.ts";
import { allowWakes, recurringSchedules, schedulerFunctionName, wakePrefix, wakeRole } from "./wake.ts";

const specs = new Map<string, FunctionSpec>();
for (const spec of functionSpecs(config)) {
  if (specs.has(spec.name)) throw new Error(`two functions are named "${spec.name}": rename the runner`);
  specs.set(spec.name, spec);
}

function spec(name: string): FunctionSpec {
  const found = specs.get(name);
  if (!found) throw new Error(`functionSpecs() has no function "${name}"`);
  return found;
}

/** "runner-cpu" -> "RunnerCpu": SST component (and `Resource`) name. */
export function componentName(name: string): string {
  return name
    .split(/[^A-Za-z0-9]+/)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join("");
}

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

function leaseholdFunction(name: string, extra: Extra = {}): sst.aws.Function {
  const s = spec(name);
  return new sst.aws.Function(componentName(name), {
    handler: s.handler,
    runtime: "nodejs22.x",
    timeout: `${s.timeoutSeconds} seconds`,
    memory: `${s.memoryMb} MB`,
    link: [databaseUrl, ...(extra.link ?? [])],
    environment: {
      POWERTOOLS_SERVICE_NAME: SERVICE_NAME,
      POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
      ...s.environment,
      ...extra.environment,
    },
    retries: extra.retries,
    concurrency: extra.concurrency,
    url: extra.url,
    permissions: extra.permissions,
    transform: {
      // New code goes live only after this deploy's migrations ran.
      function: (args, opts) => {
        if (extra.functionName) args.name = extra.functionName;
        opts.dependsOn = [migration];
      },
    },
  });
}

/** Arming a one-time `at()` wake-up: create the schedule, and hand it the role that invokes the scheduler. */
const armWakes = [
  { actions: ["scheduler:CreateSchedule"], resources: ["*"] },
  { actions: ["iam:PassRole"], resources: [wakeRole.arn] },
];

/** Runner functions by function name: each config.runners key, and `<key>-light` for a light variant. */
export const runners: Record<string, sst.aws.Function> = Object.fromEntries(
  runnerFunctions(config).map((runner) => [
    runner.name,
    leaseholdFunction(runner.name, {
      // No async retries (a retry would only start a second runner), and a
      // failed invocation wakes the scheduler: see `runnerFailures` below.
      // The hard cap on concurrent invocations of this runner.
      concurrency: { reserved: runner.maxConcurrency },
      // A follow-up job for another queue, or for later, wakes the scheduler.
      environment: { LEASEHOLD_SCHEDULER_FUNCTION: schedulerFunctionName },
      permissions: [{ actions: ["lambda:InvokeFunction"], resources: [`arn:aws:lambda:*:*:function:${schedulerFunctionName}`] }],
    }),
  ]),
);

export const rescuer = leaseholdFunction("rescuer", { retries: 0 });

export const scheduler = leaseholdFunction("scheduler", {
  retries: 0,
  functionName: schedulerFunctionName,
  // Linking a function grants lambda:InvokeFunction on it: the runners, the
  // rescuer (invoked while jobs run), and itself (a successor, by name).
  link: [...Object.values(runners), rescuer],
  permissions: [
    ...armWakes,
    { actions: ["lambda:InvokeFunction"], resources: [`arn:aws:lambda:*:*:function:${schedulerFunctionName}`] },
  ],
  environment: {
    LEASEHOLD_RUNNER_FUNCTIONS: $jsonStringify(
      Object.fromEntries(Object.entries(runners).map(([name, fn]) => [name, fn.name])),
    ),
    LEASEHOLD_RESCUER_FUNCTION: rescuer.name,
    LEASEHOLD_WAKE_ROLE_ARN: wakeRole.arn,
    LEASEHOLD_WAKE_PREFIX: wakePrefix,
  },
});

/**
 * A runner invocation that fails (a crash, an out-of-memory kill, a
 * timeout) is not retried, and goes to its on-failure destination, the
 * scheduler (`FunctionSpec.onFailure`): woken, it watches the leases the
 * runner left. This is what lets a scheduler that started runners for every
 * ready job return at once. One config per function: it replaces SST's own
 * (`retries`), which has no destination.
 */
export const runnerFailures = Object.keys(runners).map((name) => {
  if (spec(name).onFailure !== "scheduler") throw new Error(`runner ${name}: on-failure destination must be the scheduler`);
  return new aws.lambda.FunctionEventInvokeConfig(`${componentName(name)}OnFailure`, {
    functionName: runners[name]!.name,
    maximumRetryAttempts: 0,
    destinationConfig: { onFailure: { destination: scheduler.arn } },
  });
});

export const wakePolicy = allowWakes(scheduler.arn);
export const recurringJobSchedules = recurringSchedules(scheduler.arn);

export const api = leaseholdFunction("api", {
  // Linked to the scheduler so an enqueue can wake it right after commit,
  // and allowed to arm an at() schedule when that Invoke is slow.
  link: [apiToken, scheduler],
  permissions: armWakes,
  environment: {
    LEASEHOLD_SCHEDULER_FUNCTION: scheduler.name,
    LEASEHOLD_SCHEDULER_ARN: scheduler.arn,
    LEASEHOLD_WAKE_ROLE_ARN: wakeRole.arn,
    LEASEHOLD_WAKE_PREFIX: wakePrefix,
  },
  url: true,
});
