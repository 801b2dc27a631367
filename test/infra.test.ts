/**
 * Invariants between configuration, functions, infra and metrics, checked
 * without AWS. The last block runs sst.config.ts's `run()` against stand-ins
 * for the SST globals and checks the arguments infra really passes.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { writeEntries } from "../functions/entries.ts";
import { installFakeGlobals, type Created } from "./support/sst-stubs.ts";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { defineConfig, functionSpecs, LIGHT_MAX_CONCURRENCY, RUNNER_MARGIN_MS, runnerFunctions } from "../shared/config.ts";
import config from "../leasehold.config.ts";
import { Dimension, Metric, METRIC_DIMENSIONS, METRICS_NAMESPACE, SERVICE_NAME } from "../shared/metrics-names.ts";
import { alarmSpecs, configuredQueues, LAMBDA_NAMESPACE } from "../infra/alarm-specs.ts";
import { isValidSchedule, parseSchedule } from "../infra/schedule.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

describe("runner sizing", () => {
  it("every runner's timeout covers its longest lease plus the margin", () => {
    for (const [name, runner] of Object.entries(config.runners)) {
      expect(runner.timeoutSeconds * 1000, name).toBeGreaterThan(runner.maxLeaseMs + RUNNER_MARGIN_MS);
    }
  });

  it("defineConfig rejects a runner whose timeout cannot cover its lease, naming the field", () => {
    const bad = () => defineConfig({ runners: { slow: { queues: ["q"], timeoutSeconds: 30, maxLeaseMs: 30_000 } } });
    expect(bad).toThrow(/timeoutSeconds/);
    try {
      bad();
    } catch (error) {
      const issues = (error as { issues?: { path: unknown[] }[] }).issues;
      expect(issues?.map((i) => i.path)).toContainEqual(["runners", "slow", "timeoutSeconds"]);
    }
  });
});

/** "dir/module.handler" -> the source file and the export it names. */
function handlerSource(handler: string): { file: string | undefined; exportName: string } {
  const dot = handler.lastIndexOf(".");
  const base = handler.slice(0, dot);
  const file = [".ts", ".mts", ".js", ".mjs"].map((ext) => join(root, base + ext)).find((f) => existsSync(f));
  return { file, exportName: handler.slice(dot + 1) };
}

function exportsName(source: string, name: string): boolean {
  const direct = new RegExp(`export\\s+(const|let|var|(async\\s+)?function\\*?)\\s+${name}\\b`);
  const list = /export\s*\{([^}]*)\}/g;
  if (direct.test(source)) return true;
  for (const match of source.matchAll(list)) {
    const names = match[1]!.split(",").map((part) => part.trim().split(/\s+as\s+/).pop());
    if (names.includes(name)) return true;
  }
  return false;
}

function expectHandlerExists(handler: string): void {
  expect(handler, handler).toMatch(/^\.leasehold\/functions\/[\w-]+\.handler$/);
  const { file, exportName } = handlerSource(handler);
  expect(file, `${handler}: no generated entry`).toBeDefined();
  expect(exportsName(readFileSync(file!, "utf8"), exportName), `${file} exports ${exportName}`).toBe(true);
}

describe("function entries (functions/entries.ts)", () => {
  it("each generated entry builds its handler from the app's jobs and config, and exports it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leasehold-entries-"));
    try {
      const files = writeEntries({ dir, jobsModule: join(root, "jobs/index.ts"), config, factories: join(root, "functions/lambda.ts") });
      const env = { DATABASE_URL: "postgres://u@h/db", LEASEHOLD_API_TOKEN: "t".repeat(32) };
      const saved = { ...process.env };
      Object.assign(process.env, env);
      try {
        for (const [kind, file] of Object.entries(files)) {
          const text = readFileSync(file, "utf8");
          expect(text, kind).toContain(JSON.stringify(config));
          const { handler } = (await import(/* @vite-ignore */ file)) as { handler?: unknown };
          expect(typeof handler, kind).toBe("function");
        }
      } finally {
        for (const key of Object.keys(env)) if (!(key in saved)) delete process.env[key];
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a runner entry refuses a config without that runner, naming the runners it has", async () => {
    const { createRunnerHandler } = await import("../functions/lambda.ts");
    expect(() => createRunnerHandler({ registry: new Map(), config, runner: "nope" })).toThrow(/no runner named nope .*runner, runner-cpu/);
  });

  it("the handler check recognises the usual export forms", () => {
    expect(exportsName("export const handler = async () => {}", "handler")).toBe(true);
    expect(exportsName("export async function handler(event) {}", "handler")).toBe(true);
    expect(exportsName("const h = 1;\nexport { h as handler };", "handler")).toBe(true);
    expect(exportsName("export const handlerX = 1", "handler")).toBe(false);
  });
});

describe("schedules", () => {
  it("the scheduler and rescuer schedules are valid EventBridge expressions", () => {
    expect(() => parseSchedule(config.scheduler.schedule)).not.toThrow();
    expect(() => parseSchedule(config.rescuer.schedule)).not.toThrow();
  });

  const localScheduler = join(root, "dev/lambda/schedule.ts");
  it.skipIf(!existsSync(localScheduler))("the local runtime (dev/lambda/schedule.ts) runs them too", async () => {
    const local = (await import(/* @vite-ignore */ localScheduler)) as { parseSchedule: (e: string) => unknown };
    expect(() => local.parseSchedule(config.scheduler.schedule)).not.toThrow();
    expect(() => local.parseSchedule(config.rescuer.schedule)).not.toThrow();
  });

  it("accepts valid rate and cron expressions", () => {
    expect(parseSchedule("rate(1 minute)")).toEqual({ kind: "rate", value: 1, unit: "minute", seconds: 60 });
    expect(parseSchedule("rate(5 minutes)")).toMatchObject({ seconds: 300 });
    expect(parseSchedule("rate(2 hours)")).toMatchObject({ seconds: 7_200 });
    for (const ok of [
      "cron(* * * * ? *)",
      "cron(0/5 * * * ? *)",
      "cron(15 10 ? * MON-FRI *)",
      "cron(0 8 1 * ? 2030)",
      "cron(0 18 ? * 6L *)",
      "cron(0 10 ? * 2#3 *)",
      "cron(0 0 L * ? *)",
      "cron(0,30 9-17 ? JAN-MAR SUN,SAT *)",
    ]) {
      expect(isValidSchedule(ok), ok).toBe(true);
    }
  });

  it("rejects invalid expressions", () => {
    for (const bad of [
      "rate(1 minutes)",
      "rate(5 minute)",
      "rate(0 minutes)",
      "rate(1 second)",
      "rate(1minute)",
      "every minute",
      "cron(* * * * *)",
      "cron(* * * * * *)",
      "cron(* * ? * ? *)",
      "cron(60 * * * ? *)",
      "cron(0 24 * * ? *)",
      "cron(0 0 32 * ? *)",
      "cron(0 0 ? 13 MON *)",
      "cron(0 0 ? * FOO *)",
      "cron(0/0 * * * ? *)",
      "cron(5-1 * * * ? *)",
      "*/5 * * * *",
    ]) {
      expect(isValidSchedule(bad), bad).toBe(false);
    }
  });
});

describe("alarm specs", () => {
  const specs = alarmSpecs(config);
  const byName = new Map(specs.map((s) => [s.name, s]));
  const metricNames = new Set<string>(Object.values(Metric));

  it("use only the namespace, metric names and dimension sets of shared/metrics-names.ts", () => {
    for (const spec of specs.filter((s) => s.namespace !== LAMBDA_NAMESPACE)) {
      expect(spec.namespace, spec.name).toBe(METRICS_NAMESPACE);
      expect(metricNames.has(spec.metricName), spec.name).toBe(true);
      const expected = METRIC_DIMENSIONS[spec.metricName as keyof typeof METRIC_DIMENSIONS];
      expect(Object.keys(spec.dimensions).sort(), spec.name).toEqual([...expected].sort());
      expect(spec.dimensions[Dimension.Service], spec.name).toBe(SERVICE_NAME);
    }
  });

  it("alarm on dead jobs with the rescuer's dimensions (service only)", () => {
    expect(byName.get("DeadJobs")).toMatchObject({
      namespace: "Leasehold",
      metricName: "DeadJobs",
      dimensions: { service: "leasehold" },
      statistic: "Sum",
      comparison: "GreaterThanThreshold",
      threshold: config.alarms.deadJobsThreshold,
    });
  });

  it("alarm on fencing refusals above the configured threshold", () => {
    expect(byName.get("StaleSettles")).toMatchObject({
      metricName: Metric.StaleSettles,
      dimensions: { service: SERVICE_NAME },
      threshold: config.alarms.staleSettlesThreshold,
    });
  });

  it("alarm on unserved jobs, all queues together (configured or not), once they stay for the configured minutes", () => {
    expect(byName.get("UnservedJobs")).toMatchObject({
      namespace: METRICS_NAMESPACE,
      metricName: Metric.UnservedJobs,
      dimensions: { service: SERVICE_NAME },
      statistic: "Maximum",
      comparison: "GreaterThanThreshold",
      threshold: 0,
      period: 60,
      evaluationPeriods: config.alarms.unservedMinutes,
    });
    expect(alarmSpecs(defineConfig({ alarms: { unservedMinutes: 15 } })).find((s) => s.name === "UnservedJobs")!.evaluationPeriods).toBe(15);
  });

  it("alarm per queue on the oldest ready job's age", () => {
    const ages = specs.filter((s) => s.metricName === Metric.OldestReadyAgeSeconds);
    expect(ages.map((s) => s.dimensions[Dimension.Queue]).sort()).toEqual(configuredQueues(config).sort());
    for (const spec of ages) {
      expect(spec).toMatchObject({ statistic: "Maximum", threshold: config.alarms.oldestReadyAgeSeconds });
    }
  });

  it("alarm on every runner's Lambda Errors and Throttles", () => {
    for (const runner of Object.keys(config.runners)) {
      for (const metricName of ["Errors", "Throttles"]) {
        const spec = specs.find((s) => s.lambdaFunction === runner && s.metricName === metricName);
        expect(spec, `${runner} ${metricName}`).toMatchObject({ namespace: LAMBDA_NAMESPACE, threshold: 0 });
      }
    }
  });

  it("alarm per invoked function on sustained Invoke failures, and on a scheduler that left its queue unwatched", () => {
    const invokes = specs.filter((s) => s.metricName === Metric.InvokeFailures);
    const fns = [...Object.keys(config.runners).flatMap((r) => (config.runners[r]!.light ? [r, `${r}-light`] : [r])), "scheduler", "rescuer"];
    expect(invokes.map((s) => s.dimensions[Dimension.Function]).sort()).toEqual(fns.sort());
    for (const spec of invokes) {
      expect(spec).toMatchObject({
        statistic: "Sum", comparison: "GreaterThanThreshold", threshold: config.alarms.invokeFailureThreshold,
        period: 60 * config.alarms.invokeFailureMinutes, evaluationPeriods: 1, treatMissingData: "notBreaching",
      });
    }
    const custom = alarmSpecs(defineConfig({ alarms: { invokeFailureMinutes: 10, invokeFailureThreshold: 0 } })).find((s) => s.name === "InvokeFailures-scheduler");
    expect(custom).toMatchObject({ period: 600, threshold: 0 });
    expect(byName.get("WatchLost")).toMatchObject({ metricName: Metric.WatchLost, dimensions: { service: SERVICE_NAME }, threshold: 0, period: 60 });
  });

  it("have unique names and the fields a metric comparison needs", () => {
    expect(byName.size).toBe(specs.length);
    for (const spec of specs) {
      expect(Object.keys(spec)).toEqual(
        expect.arrayContaining([
          "name",
          "namespace",
          "metricName",
          "dimensions",
          "threshold",
          "comparison",
          "period",
          "evaluationPeriods",
          "statistic",
        ]),
      );
    }
  });
});

// --- sst.config.ts against stand-ins for the SST globals -------------------

/** Component names as infra/functions.ts derives them: "runner-cpu" -> "RunnerCpu". */
function pascal(name: string): string {
  return name
    .split(/[^A-Za-z0-9]+/)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join("");
}

describe("sst.config.ts composition (SST globals stubbed)", () => {
  const created: Created[] = [];
  let outputs: Record<string, unknown>;
  const all = (type: string) => created.filter((c) => c.type === type);
  const fn = (name: string) => {
    const found = all("sst.aws.Function").find((c) => c.name === name);
    if (!found) throw new Error(`no function ${name}`);
    return found;
  };

  beforeAll(async () => {
    installFakeGlobals(created, root);
    const previous = process.env.LEASEHOLD_ALARM_EMAIL;
    process.env.LEASEHOLD_ALARM_EMAIL = "ops@example.com";
    try {
      // A non-literal specifier keeps the project's tsc out of the SST-typed files.
      const path = join(root, "sst.config.ts");
      const app = (await import(/* @vite-ignore */ path)).default as {
        app: (input: { stage: string }) => Record<string, unknown>;
        run: () => Promise<Record<string, unknown>>;
      };
      expect(app.app({ stage: "production" })).toMatchObject({ removal: "retain", protect: true, home: "aws" });
      expect(app.app({ stage: "dev" })).toMatchObject({ removal: "remove", protect: false, home: "aws" });
      outputs = await app.run();
    } finally {
      if (previous === undefined) delete process.env.LEASEHOLD_ALARM_EMAIL;
      else process.env.LEASEHOLD_ALARM_EMAIL = previous;
    }
  });

  it("declares the two secrets", () => {
    expect(all("sst.Secret").map((c) => c.name).sort()).toEqual(["ApiToken", "DatabaseUrl"]);
  });

  it("deploys only the generated entries, each exporting its handler (migrate included)", () => {
    for (const c of all("sst.aws.Function")) expectHandlerExists(c.args.handler);
  });

  it("runs every function on Node.js 22, linked to the database", () => {
    for (const c of all("sst.aws.Function")) {
      expect(c.args.runtime, c.name).toBe("nodejs22.x");
      expect(c.args.link.map((l: { name: string }) => l.name), c.name).toContain("DatabaseUrl");
    }
  });

  it("sizes each function from functionSpecs(config) and publishes metrics under the shared names", () => {
    for (const spec of functionSpecs(config)) {
      const c = fn(pascal(spec.name));
      expect(c.args).toMatchObject({
        handler: spec.handler,
        timeout: `${spec.timeoutSeconds} seconds`,
        memory: `${spec.memoryMb} MB`,
        environment: { ...spec.environment, POWERTOOLS_SERVICE_NAME: SERVICE_NAME, POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE },
      });
    }
  });

  it("runners: no async retries, a failed invocation wakes the scheduler, reserved concurrency = maxConcurrency, LEASEHOLD_RUNNER set", () => {
    const runnerFns = all("sst.aws.Function").filter((c) => c.args.handler === ".leasehold/functions/runner.handler");
    expect(runnerFns.map((c) => c.name).sort()).toEqual(runnerFunctions(config).map((f) => pascal(f.name)).sort());
    const invokeConfigs = all("aws.lambda.FunctionEventInvokeConfig");
    for (const c of runnerFns) {
      const name = c.args.environment.LEASEHOLD_RUNNER as string;
      expect(c.args.retries).toBeUndefined();
      expect(invokeConfigs.find((i) => i.args.functionName === `fn-${c.name}`)?.args).toEqual({
        functionName: `fn-${c.name}`, maximumRetryAttempts: 0, destinationConfig: { onFailure: { destination: "arn:fn-Scheduler" } },
      });
      const light = c.args.environment.LEASEHOLD_RUNNER_VARIANT === "light";
      expect(c.args.concurrency).toEqual({ reserved: light ? LIGHT_MAX_CONCURRENCY : config.runners[name]!.maxConcurrency });
      if (light) expect(c.args.memory).toBe(`${config.runners[name]!.light!.memoryMb} MB`);
    }
    expect(invokeConfigs).toHaveLength(runnerFns.length);
  });

  it("the scheduler may invoke every runner and knows their function names", () => {
    const scheduler = fn("Scheduler");
    const runnerNames = runnerFunctions(config).map((f) => f.name);
    expect(runnerNames).toContain("runner-light");
    expect(JSON.parse(scheduler.args.environment.LEASEHOLD_RUNNER_FUNCTIONS)).toEqual(
      Object.fromEntries(runnerNames.map((n) => [n, `fn-${pascal(n)}`])),
    );
    const linked = scheduler.args.link.map((l: { name: string }) => l.name);
    expect(linked).toEqual(expect.arrayContaining(runnerNames.map((n) => `fn-${pascal(n)}`)));
  });

  it("the scheduler and the API may arm at() wake-ups with the role that invokes the scheduler; runners may wake it", () => {
    const [role] = all("aws.iam.Role");
    expect(JSON.parse(role!.args.assumeRolePolicy).Statement[0].Principal).toEqual({ Service: "scheduler.amazonaws.com" });
    expect(JSON.parse(all("aws.iam.RolePolicy")[0]!.args.policy).Statement[0]).toMatchObject({ Action: "lambda:InvokeFunction", Resource: "arn:fn-Scheduler" });
    for (const name of ["Scheduler", "Api"]) {
      expect(fn(name).args.permissions, name).toEqual(expect.arrayContaining([
        { actions: ["scheduler:CreateSchedule"], resources: ["*"] },
        { actions: ["iam:PassRole"], resources: ["arn:role-WakeRole"] },
      ]));
      expect(fn(name).args.environment.LEASEHOLD_WAKE_ROLE_ARN).toBe("arn:role-WakeRole");
    }
    // The scheduler deletes a retry schedule it no longer needs; the API arms only.
    expect(fn("Scheduler").args.permissions).toEqual(expect.arrayContaining([{ actions: ["scheduler:DeleteSchedule"], resources: ["*"] }]));
    expect(fn("Api").args.permissions).not.toEqual(expect.arrayContaining([{ actions: ["scheduler:DeleteSchedule"], resources: ["*"] }]));
    const args: { name?: string } = {};
    fn("Scheduler").args.transform.function(args, {});
    expect(fn("Runner").args.environment.LEASEHOLD_SCHEDULER_FUNCTION).toBe(args.name);
    expect(fn("Runner").args.permissions[0].resources[0]).toMatch(new RegExp(`:function:${args.name}$`));
  });

  it("deploys each recurring job as an EventBridge cron in its time zone that delivers its tick time to the scheduler", async () => {
    const { recurring } = await import("../jobs/index.ts");
    const schedules = all("aws.scheduler.Schedule");
    expect(schedules).toHaveLength(recurring.length);
    expect(schedules[0]!.args).toMatchObject({
      scheduleExpression: "cron(0 6 * * ? *)",
      scheduleExpressionTimezone: "Europe/Paris",
      flexibleTimeWindow: { mode: "OFF" },
      target: { arn: "arn:fn-Scheduler", roleArn: "arn:role-WakeRole" },
    });
    expect(JSON.parse(schedules[0]!.args.target.input)).toEqual({
      source: "leasehold.recurring", name: "report.daily", scheduledTime: "<aws.scheduler.scheduled-time>",
    });
  });

  it("passes the config's schema to every function, and the component's link grants enqueue and wake-up", () => {
    for (const c of all("sst.aws.Function")) expect(c.args.environment.LEASEHOLD_SCHEMA, c.name).toBe(config.schema);
    const [link, ...others] = all("sst.Linkable");
    expect(link!.name).toBe("Leasehold");
    expect(others).toHaveLength(0);
    expect(link!.args.properties).toMatchObject({ schema: config.schema, schedulerFunction: "fn-Scheduler" });
    expect(link!.args.include).toContainEqual({ type: "aws.permission", actions: ["lambda:InvokeFunction"], resources: ["arn:fn-Scheduler"] });
  });

  it("the API has a function URL and the token", () => {
    const api = fn("Api");
    expect(api.args.url).toBe(true);
    expect(api.args.link.map((l: { name: string }) => l.name)).toContain("ApiToken");
    expect(outputs.api).toBe("https://Api.example");
    expect(outputs.rescuerLogGroup).toBe("/aws/lambda/fn-Rescuer");
    expect(outputs.deathLogGroups).toEqual([...runnerFunctions(config).map((f) => `/aws/lambda/fn-${pascal(f.name)}`), "/aws/lambda/fn-Rescuer", "/aws/lambda/fn-Scheduler"]);
  });

  it("safety-net crons trigger the scheduler and rescuer on the configured schedules", () => {
    const crons = Object.fromEntries(all("sst.aws.CronV2").map((c) => [c.name, c.args]));
    expect(crons.SchedulerCron.schedule).toBe(config.scheduler.schedule);
    expect(crons.SchedulerCron.function.name).toBe("fn-Scheduler");
    expect(crons.RescuerCron.schedule).toBe(config.rescuer.schedule);
    expect(crons.RescuerCron.function.name).toBe("fn-Rescuer");
  });

  it("migrations run once per deploy that changes them, before new code goes live", () => {
    const [invocation, ...more] = all("aws.lambda.Invocation");
    expect(more).toHaveLength(0);
    expect(invocation!.args.functionName).toBe("fn-Migrate");
    expect(invocation!.args.triggers.migrations).toMatch(/^[0-9a-f]{64}$/);
    expect(fn("Migrate").args.copyFiles).toEqual([{ from: "migrations", to: "migrations" }]);
    expect(fn("Migrate").args.environment.LEASEHOLD_SCHEMA).toBe(config.schema);
    const opts: { dependsOn?: unknown[] } = {};
    fn("Runner").args.transform.function({}, opts);
    expect(opts.dependsOn).toHaveLength(1);
  });

  it("creates one alarm per spec, notifying the topic, on the deployed runner names", () => {
    const alarms = all("aws.cloudwatch.MetricAlarm");
    const specs = alarmSpecs(config);
    expect(alarms).toHaveLength(specs.length);
    for (const spec of specs) {
      const alarm = alarms.find((a) => a.args.name === `leasehold-test-${spec.name}`);
      expect(alarm, spec.name).toBeDefined();
      expect(alarm!.args).toMatchObject({
        namespace: spec.namespace,
        metricName: spec.metricName,
        threshold: spec.threshold,
        alarmActions: ["arn:topic-Alarms"],
      });
      const dims = spec.lambdaFunction
        ? { FunctionName: `fn-${pascal(spec.lambdaFunction)}` }
        : spec.dimensions;
      expect(alarm!.args.dimensions).toEqual(dims);
    }
    expect(all("aws.sns.TopicSubscription")[0]?.args).toMatchObject({ protocol: "email", endpoint: "ops@example.com" });
  });

  it("the dashboard charts every Leasehold metric with its published dimensions", () => {
    const [dashboard] = all("aws.cloudwatch.Dashboard");
    const body = JSON.parse(dashboard!.args.dashboardBody) as { widgets: { properties: { metrics: unknown[][] } }[] };
    const lines = body.widgets.flatMap((w) => w.properties.metrics);
    for (const metric of Object.values(Metric)) {
      const line = lines.find((l) => l[0] === METRICS_NAMESPACE && l[1] === metric);
      expect(line, metric).toBeDefined();
      const dimNames = line!.slice(2, -1).filter((_, i) => i % 2 === 0);
      expect(dimNames, metric).toEqual([...METRIC_DIMENSIONS[metric]]);
    }
    expect(lines.some((l) => l[0] === "AWS/Lambda" && l[1] === "ConcurrentExecutions")).toBe(true);
  });
});
