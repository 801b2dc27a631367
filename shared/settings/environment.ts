/**
 * The environment contract between infra and the functions: every variable
 * a function reads, with its one default, in one zod schema. Infra writes
 * the variables through `writeEnvironment()` (infra/functions.ts), the
 * functions read them through `readEnvironment()`, and `DEPLOYED_ENVIRONMENT`
 * says which ones infra must set on which function (the synthesized stack is
 * checked against it: test/synth.test.ts). Nothing in functions/ or shared/
 * reads `process.env` anywhere else (test/environment.test.ts greps for it).
 *
 * A variable whose default is "unset" means: that feature is off. Deployed,
 * infra sets every variable of `DEPLOYED_ENVIRONMENT`; locally the Lambda
 * runtime (dev/lambda/lambda-env.ts) sets the same ones with local values.
 *
 * Settings that exist only locally (the Neon driver's WebSocket relay to a
 * plain Postgres, handler output labelled by job) are not here: they are the
 * dev stack's (dev/local-env.ts), applied by what it bundles into its local
 * functions, and nothing in functions/ or shared/ reads them.
 */
import * as z from "zod";

/** Each variable, by the name code uses for it. */
export const ENV = {
  /** Postgres schema of the queue tables. Default: the config's `schema` (shared/settings/settings.ts). */
  schema: "LEASEHOLD_SCHEMA",
  /** The database URL, where no `DatabaseUrl` secret is linked (local runs, the CLI). */
  databaseUrl: "DATABASE_URL",
  /** The API's bearer token, where no `ApiToken` secret is linked. */
  apiToken: "LEASEHOLD_API_TOKEN",
  /** Which of `config.runners` a runner function is. */
  runner: "LEASEHOLD_RUNNER",
  /** "light": the runner's light variant. */
  runnerVariant: "LEASEHOLD_RUNNER_VARIANT",
  /** JSON: deployed function name of each runner, by its config name. */
  runnerFunctions: "LEASEHOLD_RUNNER_FUNCTIONS",
  /** The scheduler's function name: what an enqueue or a runner wakes. Unset: nothing is woken. */
  schedulerFunction: "LEASEHOLD_SCHEDULER_FUNCTION",
  /** The scheduler's ARN: the target of an at() wake-up. */
  schedulerArn: "LEASEHOLD_SCHEDULER_ARN",
  /** The rescuer's function name, which the scheduler invokes while jobs run. Unset: not invoked. */
  rescuerFunction: "LEASEHOLD_RESCUER_FUNCTION",
  /** The role EventBridge Scheduler assumes to invoke the scheduler. Unset: no at() wake-ups. */
  wakeRoleArn: "LEASEHOLD_WAKE_ROLE_ARN",
  /** Name prefix of the one-time at() schedules. */
  wakePrefix: "LEASEHOLD_WAKE_PREFIX",
  /** Lambda's own: the task root, where the migrate bundle's SQL files are. */
  taskRoot: "LAMBDA_TASK_ROOT",
} as const;

export type EnvKey = keyof typeof ENV;

/**
 * The edge Worker's bindings (functions/edge/env.ts reads them, infra/edge.ts
 * binds them): Workers have no process environment, everything is a binding.
 * A setting the Worker shares with the functions has the contract's name
 * (`ENV`), so a rename reaches both; the others are the Worker's own.
 */
export const EDGE_ENV = {
  /** Plain binding (tests, wrangler), else the linked `DatabaseUrl` secret. */
  databaseUrl: ENV.databaseUrl,
  /** Postgres schema of the queue tables (infra binds the config's). */
  schema: ENV.schema,
  /** The API's bearer token, else the linked `ApiToken` secret; without either the Worker serves no API routes. */
  apiToken: ENV.apiToken,
  /** Shared by the edge scheduler and the runner Worker (else the linked `RunnerSecret`): a runner request must carry it. */
  runnerSecret: "RUNNER_SECRET",
  /** The runner Worker as a service binding (infra links it under this name)... */
  runnerService: "EdgeRunner",
  /** ...or as a URL (`https://.../leasehold/run`). */
  runnerUrl: "RUNNER_URL",
  /** The configuration as JSON (infra binds the app's), else the one the Worker was built with. */
  config: "LEASEHOLD_CONFIG",
  /** Optional Workers Analytics Engine dataset: one data point per dead job. */
  metrics: "LEASEHOLD_METRICS",
} as const;

/**
 * The Workers runtime the edge Worker runs on (infra/edge.ts deploys with it,
 * the tests and the bench run it so in workerd). `nodejs_compat` gives the
 * Neon driver the runtime's `Buffer` and `setImmediate`, which it uses where
 * they exist, instead of its bundled JavaScript ones (bench/levers.md, lever
 * 21). The bundle itself imports no Node built-in (test/edge-bundle.test.ts).
 */
export const EDGE_COMPATIBILITY = { date: "2026-04-01", flags: ["nodejs_compat"] } as const;
export type EnvSource = Record<string, string | undefined>;

/** The runner a runner function is when nothing says which: the config's default runner. */
export const DEFAULT_RUNNER = "runner";
/** The at() schedules' name prefix when infra sets none (infra sets one per stage). */
export const DEFAULT_WAKE_PREFIX = "leasehold-wake";

/** An empty value is an unset one, as in a shell. */
const unset = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === "" ? undefined : v), schema);
const text = unset(z.string().optional());

const environmentSchema = z.object({
  [ENV.schema]: text,
  [ENV.databaseUrl]: text,
  [ENV.apiToken]: text,
  [ENV.runner]: unset(z.string().default(DEFAULT_RUNNER)),
  [ENV.runnerVariant]: unset(z.enum(["light"]).optional()),
  [ENV.runnerFunctions]: unset(
    z.string().default("{}").transform((json, ctx) => {
      let value: unknown;
      try {
        value = JSON.parse(json);
      } catch {
        value = undefined;
      }
      const parsed = z.record(z.string(), z.string()).safeParse(value);
      if (!parsed.success) ctx.addIssue({ code: "custom", message: `${ENV.runnerFunctions}: a JSON object of function names` });
      return parsed.data ?? {};
    }),
  ),
  [ENV.schedulerFunction]: text,
  [ENV.schedulerArn]: text,
  [ENV.rescuerFunction]: text,
  [ENV.wakeRoleArn]: text,
  [ENV.wakePrefix]: unset(z.string().default(DEFAULT_WAKE_PREFIX)),
  [ENV.taskRoot]: text,
});

/** What the functions read, by the names of `ENV`, defaults applied. */
export type Environment = {
  [K in EnvKey]: z.output<typeof environmentSchema>[(typeof ENV)[K]];
};

/** The process's environment: the one place production code takes it from. */
export function processEnvironment(): EnvSource {
  return process.env;
}

/** Reads and checks the environment; the error names the variable, never its value. */
export function readEnvironment(env: EnvSource = processEnvironment()): Environment {
  const picked = Object.fromEntries(Object.values(ENV).map((name) => [name, env[name]]));
  const parsed = environmentSchema.safeParse(picked);
  if (!parsed.success) {
    throw new Error(`environment: ${parsed.error.issues.map((i) => `${String(i.path[0] ?? "")} ${i.message}`.trim()).join("; ")}`);
  }
  const data = parsed.data as Record<string, unknown>;
  return Object.fromEntries(Object.entries(ENV).map(([key, name]) => [key, data[name]])) as Environment;
}

/** The variables infra sets, from values by the names of `ENV` (plain strings or Pulumi inputs). */
export function writeEnvironment<V>(values: Partial<Record<EnvKey, V>>): Record<string, V> {
  return Object.fromEntries(Object.entries(values).flatMap(([key, value]) => (value === undefined ? [] : [[ENV[key as EnvKey], value as V]])));
}

/** The deployed functions, by the kind of their generated entry. */
export type FunctionKind = "runner" | "scheduler" | "rescuer" | "api" | "migrate";

/**
 * What infra must set on each deployed function: every variable that
 * function reads whose unset default would turn a deployed feature off.
 * The secrets come linked (`DatabaseUrl`, `ApiToken`), not as variables.
 */
export const DEPLOYED_ENVIRONMENT: Record<FunctionKind, readonly EnvKey[]> = {
  runner: ["schema", "runner", "schedulerFunction"],
  scheduler: ["schema", "runnerFunctions", "rescuerFunction", "wakeRoleArn", "wakePrefix"],
  rescuer: ["schema"],
  api: ["schema", "schedulerFunction", "schedulerArn", "wakeRoleArn", "wakePrefix"],
  migrate: ["schema"],
};

/** The variables a runner's light variant needs beside a runner's. */
export const LIGHT_RUNNER_ENVIRONMENT: readonly EnvKey[] = ["runnerVariant"];
