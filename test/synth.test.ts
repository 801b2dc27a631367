/**
 * This repository's stack as `sst deploy` would create it: sst.config.ts's
 * `run()` with SST's own component code under Pulumi's mock runtime
 * (dev/synth/synth.ts), every resource recorded with its real inputs, then
 * each check of dev/synth/checks.ts as a test. No AWS account, no network.
 */
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import config from "../leasehold.config.ts";
import { alarmSpecs } from "../infra/alarm-specs.ts";
import { LIGHT_MAX_CONCURRENCY } from "../shared/settings/config.ts";
import { functionSpecs, runnerFunctions } from "../shared/settings/function-specs.ts";
import { METRICS_NAMESPACE, SERVICE_NAME } from "../shared/observe/metrics-names.ts";
import { CHECKS } from "../dev/synth/checks.ts";
import { Graph } from "../dev/synth/graph.ts";
import { synthesize } from "../dev/synth/synth.ts";
import { ensurePlatform } from "./support/platform.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

/** "runner-cpu" -> "RunnerCpu", as infra/context.ts names components (that file needs SST's types). */
const componentName = (name: string) => name.split(/[^A-Za-z0-9]+/).map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join("");


describe("the synthesized stack (SST's component code, Pulumi's mock runtime)", () => {
  let graph: Graph;
  beforeAll(async () => {
    ensurePlatform();
    graph = new Graph(await synthesize({ root, stage: "test", env: { LEASEHOLD_ALARM_EMAIL: "ops@example.com" } }));
  }, 600_000);

  it("records every resource SST would create, with its inputs", () => {
    const types = new Set(graph.resources.map((r) => r.type));
    for (const type of ["aws:lambda/function:Function", "aws:iam/role:Role", "aws:cloudwatch/logGroup:LogGroup", "aws:scheduler/schedule:Schedule",
      "aws:cloudwatch/metricAlarm:MetricAlarm", "aws:sns/topic:Topic", "aws:cloudwatch/dashboard:Dashboard", "aws:lambda/invocation:Invocation"]) {
      expect(types, type).toContain(type);
    }
    expect(graph.resources.length).toBeGreaterThan(80);
    expect(graph.functions().map((f) => f.name).sort()).toEqual(["Api", "Migrate", "Rescuer", "Runner", "RunnerCpu", "RunnerLight", "Scheduler"]);
    expect(graph.synth.secrets).toEqual(["ApiToken", "DatabaseUrl"]);
    expect(graph.all("aws:sns/topicSubscription:TopicSubscription")[0]?.inputs).toMatchObject({ protocol: "email", endpoint: "ops@example.com" });
  });

  it("has the outputs the README and docs/deploy.md name: the Leasehold API's URL, the log groups of deaths, the topic, the dashboard", () => {
    const api = graph.all("aws:lambda/functionUrl:FunctionUrl").find((u) => u.inputs.functionName === graph.kind("api")[0]!.functionName);
    expect(graph.synth.outputs.api).toBe(api!.state.functionUrl);
    const deaths = [...graph.kind("runner"), ...graph.kind("rescuer"), ...graph.kind("scheduler")].map((f) => f.logGroup);
    expect(graph.synth.outputs.deathLogGroups).toEqual(deaths);
    expect(graph.synth.outputs.rescuerLogGroup).toBe(graph.kind("rescuer")[0]!.logGroup);
    expect(graph.synth.outputs.alarmTopic).toBe(graph.all("aws:sns/topic:Topic")[0]!.state.arn);
    expect(graph.synth.outputs.dashboard).toBe("leasehold-test");
  });

  for (const check of CHECKS) {
    it(check.name, () => {
      expect(check.run(graph)).toEqual([]);
    });
  }

  it("a runner's cold start loads neither the API nor the AWS SDK: the SDK is a chunk of its own (nodejs.splitting), the API not bundled (the package's sideEffects)", () => {
    const runners = graph.kind("runner").map((fn) => graph.synth.built.find((b) => b.functionID === fn.name)!);
    expect(runners.length).toBeGreaterThan(0);
    const api = (path: string) => path.startsWith("functions/api/") || path.includes("node_modules/hono/");
    const sdk = (path: string) => path.includes("node_modules/@aws-sdk/client-lambda/");
    for (const b of runners) {
      expect(b.loadsAtStart, b.functionID).toContain("shared/runner/worker.ts");
      expect(b.loadsAtStart.filter((p) => api(p) || sdk(p)), b.functionID).toEqual([]);
      expect(b.bundled.filter(api), b.functionID).toEqual([]);
      // Bundled all the same, for the first wake-up of the scheduler.
      expect(b.bundled.some(sdk), b.functionID).toBe(true);
    }
    // The API's own function does load its modules: the check can see them.
    const apiBuilt = graph.synth.built.find((b) => b.functionID === graph.kind("api")[0]!.name)!;
    expect(apiBuilt.loadsAtStart.some(api)).toBe(true);
  });

  describe("sized and scheduled from this repository's config (leasehold.config.ts, jobs/index.ts)", () => {
    const fn = (name: string) => graph.functions().find((f) => f.name === name)!;

    it("each function as functionSpecs(config) says: Node.js 22, timeout, memory, environment, the shared metric names", () => {
      for (const spec of functionSpecs(config)) {
        const { lambda, env } = fn(componentName(spec.name));
        expect(lambda, spec.name).toMatchObject({ runtime: "nodejs22.x", timeout: spec.timeoutSeconds, memorySize: spec.memoryMb, handler: spec.handler });
        expect(env, spec.name).toMatchObject({ ...spec.environment, LEASEHOLD_SCHEMA: config.schema, POWERTOOLS_SERVICE_NAME: SERVICE_NAME, POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE });
      }
    });

    it("runners: reserved concurrency is maxConcurrency (a light variant's, its own) and the scheduler knows each by its config name", () => {
      const runners = runnerFunctions(config);
      expect(runners.map((r) => r.name)).toContain("runner-light");
      for (const r of runners) {
        expect(fn(componentName(r.name)).lambda.reservedConcurrentExecutions, r.name).toBe(r.light ? LIGHT_MAX_CONCURRENCY : config.runners[r.runner]!.maxConcurrency);
      }
      const names = JSON.parse(fn("Scheduler").env.LEASEHOLD_RUNNER_FUNCTIONS!) as Record<string, string>;
      expect(names).toEqual(Object.fromEntries(runners.map((r) => [r.name, fn(componentName(r.name)).functionName])));
    });

    it("the safety-net crons run on the configured schedules; each recurring job is a schedule in its time zone that delivers its tick", async () => {
      const schedules = graph.all("aws:scheduler/schedule:Schedule");
      const on = (f: string) => schedules.filter((s) => s.inputs.target.arn === fn(f).arn);
      expect(on("Rescuer").map((s) => s.inputs.scheduleExpression)).toEqual([config.rescuer.schedule]);
      const { recurring } = await import("../jobs/index.ts");
      const ticks = on("Scheduler").filter((s) => s.inputs.target.input !== "{}");
      expect(ticks).toHaveLength(recurring.length);
      expect(ticks[0]!.inputs).toMatchObject({ scheduleExpression: "cron(0 6 * * ? *)", scheduleExpressionTimezone: "Europe/Paris", flexibleTimeWindow: { mode: "OFF" } });
      expect(JSON.parse(ticks[0]!.inputs.target.input)).toEqual({ source: "leasehold.recurring", name: "report.daily", scheduledTime: "<aws.scheduler.scheduled-time>" });
      expect(on("Scheduler").find((s) => s.inputs.target.input === "{}")?.inputs.scheduleExpression).toBe(config.scheduler.schedule);
    });

    it("migrations run once per deploy that changes them, with the SQL files in the bundle", () => {
      const [invocation, ...more] = graph.all("aws:lambda/invocation:Invocation");
      expect(more).toHaveLength(0);
      expect(invocation!.inputs.functionName).toBe(fn("Migrate").functionName);
      expect(invocation!.inputs.triggers.migrations).toMatch(/^[0-9a-f]{64}$/);
      expect(invocation!.inputs.triggers.schema).toBe(config.schema);
    });

    it("one alarm per alarm spec, each named for the app and stage", () => {
      const names = graph.all("aws:cloudwatch/metricAlarm:MetricAlarm").map((a) => a.inputs.name as string).sort();
      expect(names).toEqual(alarmSpecs(config).map((s) => `leasehold-test-${s.name}`).sort());
    });
  });
});
