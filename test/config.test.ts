import { describe, expect, it } from "vitest";
import { registry } from "../jobs/index.ts";
import { defineConfig, RUNNER_MARGIN_MS } from "../shared/settings/config.ts";
import config from "../leasehold.config.ts";

describe("the deployment's configuration and the app's job types", () => {
  it("serves every job type's queue with a runner whose lease limit covers that job's lease", () => {
    for (const type of registry.values()) {
      const runners = Object.entries(config.runners).filter(([, r]) => r.queues.includes(type.queue));
      expect(runners.map(([name]) => name), `a runner for queue ${type.queue} (${type.name})`).not.toEqual([]);
      for (const [name, runner] of runners) {
        // A runner never claims a job whose lease would outlive its time, so a
        // longer lease than its limit would leave the job queued forever.
        expect(type.leaseMs, `${type.name} on ${name}`).toBeLessThanOrEqual(runner.maxLeaseMs);
        expect(runner.timeoutSeconds * 1000).toBeGreaterThanOrEqual(type.leaseMs + RUNNER_MARGIN_MS);
      }
    }
  });

  it("shares claims between groups unless a runner's queues opt out", () => {
    const cfg = defineConfig({ runners: { fair: { queues: ["a"] }, plain: { queues: ["b"], fair: false } } });
    expect([cfg.runners.fair!.fair, cfg.runners.plain!.fair]).toEqual([true, false]);
  });

  it("refuses a runner whose maxLeaseMs is under the minimum lease, naming the field", () => {
    expect(() => defineConfig({ runners: { r: { queues: ["q"], timeoutSeconds: 30, maxLeaseMs: 500 } } })).toThrow(
      /runners\.r\.maxLeaseMs.*at least 1000ms \(MIN_LEASE_MS\)|maxLeaseMs.*at least 1000ms/s,
    );
  });

  it("refuses a runner whose timeout cannot cover its longest lease, naming the field", () => {
    expect(() => defineConfig({ runners: { r: { queues: ["q"], timeoutSeconds: 30, maxLeaseMs: 30_000 } } })).toThrow(
      /runners\.r\.timeoutSeconds|timeoutSeconds/,
    );
  });
});

describe("the edge consumer's configuration", () => {
  it("is off unless set, and defaults an edge runner on the default queue when set", () => {
    expect(defineConfig({}).edge).toBeUndefined();
    const edge = defineConfig({ edge: {} }).edge!;
    expect(Object.keys(edge.runners)).toEqual(["edge-runner"]);
    expect(edge.runners["edge-runner"]!.maxLeaseMs + RUNNER_MARGIN_MS).toBeLessThanOrEqual(edge.runners["edge-runner"]!.wallMs);
  });

  it("refuses an edge runner whose wall-time budget cannot cover its longest lease, and one named like a Lambda runner", () => {
    expect(() => defineConfig({ edge: { runners: { e: { queues: ["q"], wallMs: 20_000, maxLeaseMs: 16_000 } } } })).toThrow(/wallMs|wall-time/);
    expect(() => defineConfig({ runners: { r: { queues: ["q"] } }, edge: { runners: { r: { queues: ["q"] } } } })).toThrow(/already a Lambda runner/);
  });

  it("leaves a runner invocation at least one of the Workers' 6 connections for its handlers", () => {
    expect(() => defineConfig({ edge: { connectionsPerRunner: 6 } })).toThrow();
    expect(defineConfig({ edge: { connectionsPerRunner: 5 } }).edge!.connectionsPerRunner).toBe(5);
  });
});

describe("one resolver for the settings several places read (shared/settings/settings.ts)", () => {
  it("takes a given value, then a linked secret, then the environment, then the config, then the default", async () => {
    const { resolveSettings } = await import("../shared/settings/settings.ts");
    const secret = (name: string) => (name === "DatabaseUrl" ? "postgres://linked" : name === "ApiToken" ? "linked-token" : undefined);
    const env = { DATABASE_URL: "postgres://env", LEASEHOLD_SCHEMA: "env_schema", LEASEHOLD_API_TOKEN: "env-token" };
    expect(resolveSettings({ given: { schema: "flag_schema", databaseUrl: "postgres://flag" }, secret, env, config: { schema: "cfg" } }))
      .toMatchObject({ schema: "flag_schema", databaseUrl: "postgres://flag", apiToken: "linked-token" });
    expect(resolveSettings({ secret, env, config: { schema: "cfg" } })).toMatchObject({ schema: "env_schema", databaseUrl: "postgres://linked" });
    expect(resolveSettings({ env: { LEASEHOLD_SCHEMA: "" }, config: { schema: "cfg" } })).toMatchObject({ schema: "cfg", databaseUrl: undefined, apiToken: undefined });
    expect(resolveSettings({}).schema).toBe("leasehold");
  });

  it("refuses a schema that is not a plain identifier, naming the field and changing nothing", async () => {
    const { resolveSettings } = await import("../shared/settings/settings.ts");
    expect(() => resolveSettings({ env: { LEASEHOLD_SCHEMA: 'x"; drop table jobs; --' } })).toThrow(/invalid schema name/);
    const thrown = (() => {
      try {
        resolveSettings({ config: { schema: "Bad-Name" } });
      } catch (err) {
        return err as { issues?: { path: string[] }[] };
      }
    })();
    expect(thrown?.issues?.[0]?.path).toEqual(["schema"]);
  });
});
