/**
 * Invariants between configuration, functions, infra and metrics, checked
 * without AWS. What infra really creates, through SST's own component code,
 * is checked on the synthesized stack: test/synth.test.ts.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { writeEntries } from "../functions/entries.ts";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { defineConfig, RUNNER_MARGIN_MS } from "../shared/settings/config.ts";
import config from "../leasehold.config.ts";
import { Dimension, Metric, METRIC_DIMENSIONS, METRICS_NAMESPACE, SERVICE_NAME } from "../shared/observe/metrics-names.ts";
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
  it("the local runtime (dev/lambda/schedule.ts) runs them too", async () => {
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

  it("use only the namespace, metric names and dimension sets of shared/observe/metrics-names.ts", () => {
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
