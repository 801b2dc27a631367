/**
 * The environment contract (shared/settings/environment.ts): one schema of every
 * variable infra writes and the functions read, one default each, no
 * other `process.env` read in functions/ or shared/, and no local-only
 * setting (dev/local-env.ts) named there.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { defineConfig } from "../shared/settings/config.ts";
import { functionSpecs } from "../shared/settings/function-specs.ts";
import { DEFAULT_RUNNER, DEFAULT_WAKE_PREFIX, DEPLOYED_ENVIRONMENT, EDGE_ENV, ENV, readEnvironment, writeEnvironment } from "../shared/settings/environment.ts";
import { edgeConfig, edgeSchema, edgeSecret, type EdgeEnv } from "../functions/edge/env.ts";
import { LOCAL_ENV } from "../dev/local-env.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|mts|js|mjs)$/.test(e.name))
    .map((e) => relative(root, join(e.parentPath, e.name)));
}

/** Code lines (not comments) that match `pattern`, as `file:line`. */
function codeLines(files: string[], pattern: RegExp): string[] {
  return files.flatMap((file) =>
    readFileSync(join(root, file), "utf8").split("\n").flatMap((line, i) => {
      const code = line.replace(/\/\/.*$/, "").trim();
      return pattern.test(code) && !code.startsWith("*") && !code.startsWith("/*") ? [`${file}:${i + 1}`] : [];
    }),
  );
}

/** Code lines that read `process.env`. */
const strayReads = (files: string[]) => codeLines(files, /process\.env\b/);

/** Code lines that name a local-only setting (dev/local-env.ts): by its variable, or through LOCAL_ENV. */
const LOCAL_ONLY = new RegExp([...Object.values(LOCAL_ENV), "LOCAL_ENV", "local-env"].join("|"));

describe("the environment contract", () => {
  it("no file of functions/ or shared/ reads process.env but shared/settings/environment.ts", () => {
    const files = [...sources("functions"), ...sources("shared")];
    expect(files.length).toBeGreaterThan(50);
    expect(strayReads(files).filter((at) => !at.startsWith("shared/settings/environment.ts:"))).toEqual([]);
    // The grep finds a read where there is one.
    expect(strayReads(["shared/settings/environment.ts"])).toHaveLength(1);
  });

  it("no file of functions/ or shared/ names a local-only setting, and the contract has none", () => {
    const contract: string[] = Object.values(ENV);
    for (const name of Object.values(LOCAL_ENV)) expect(contract, name).not.toContain(name);
    expect(codeLines([...sources("functions"), ...sources("shared")], LOCAL_ONLY)).toEqual([]);
    // The grep finds them where they are read: the dev stack's prelude to its local functions.
    expect(codeLines(["dev/lambda/prelude.ts"], LOCAL_ONLY).length).toBeGreaterThanOrEqual(3);
  });

  it("one default each: unset and empty read the same", () => {
    const unset = readEnvironment({});
    expect(readEnvironment(Object.fromEntries(Object.values(ENV).map((name) => [name, ""])))).toEqual(unset);
    expect(unset).toMatchObject({
      runner: DEFAULT_RUNNER, wakePrefix: DEFAULT_WAKE_PREFIX, runnerFunctions: {},
      schedulerFunction: undefined, rescuerFunction: undefined, wakeRoleArn: undefined, schema: undefined,
    });
  });

  it("reads what infra writes", () => {
    const written = writeEnvironment({
      schema: "acme", runner: "cpu", runnerVariant: "light", runnerFunctions: JSON.stringify({ cpu: "app-cpu-fn" }),
      schedulerFunction: "app-scheduler", rescuerFunction: "app-rescuer", wakeRoleArn: "arn:aws:iam::1:role/wake", wakePrefix: "app-wake",
    });
    expect(written.LEASEHOLD_SCHEMA).toBe("acme");
    expect(readEnvironment(written)).toMatchObject({
      schema: "acme", runner: "cpu", runnerVariant: "light", runnerFunctions: { cpu: "app-cpu-fn" },
      schedulerFunction: "app-scheduler", rescuerFunction: "app-rescuer", wakeRoleArn: "arn:aws:iam::1:role/wake", wakePrefix: "app-wake",
    });
  });

  it("refuses a bad value, naming the variable and not the value", () => {
    expect(() => readEnvironment({ LEASEHOLD_RUNNER_VARIANT: "heavy" })).toThrow(/LEASEHOLD_RUNNER_VARIANT/);
    const bad = () => readEnvironment({ LEASEHOLD_RUNNER_FUNCTIONS: "not-json-s3cret" });
    expect(bad).toThrow(/LEASEHOLD_RUNNER_FUNCTIONS/);
    expect(bad).not.toThrow(/s3cret/);
  });

  it("every variable a deployed function needs is one of the contract's; the runner specs write theirs through it", () => {
    const names = new Set(Object.keys(ENV));
    for (const keys of Object.values(DEPLOYED_ENVIRONMENT)) for (const key of keys) expect(names.has(key), key).toBe(true);
    const specs = functionSpecs(defineConfig({ runners: { runner: { queues: ["default"], light: {} } } }));
    expect(specs.find((s) => s.name === "runner-light")!.environment).toEqual({ LEASEHOLD_RUNNER: "runner", LEASEHOLD_RUNNER_VARIANT: "light" });
    expect(specs.find((s) => s.name === "runner")!.environment).toEqual({ LEASEHOLD_RUNNER: "runner" });
  });

  it("the edge Worker's bindings are named by the contract: the settings it shares with the functions by ENV's names", () => {
    expect(EDGE_ENV).toMatchObject({ databaseUrl: ENV.databaseUrl, schema: ENV.schema, apiToken: ENV.apiToken });
    // The Worker reads each setting under that name.
    const env = {
      [ENV.databaseUrl]: "postgres://edge/db", [ENV.schema]: "edge_jobs", [ENV.apiToken]: "edge-token", [EDGE_ENV.config]: JSON.stringify({ edge: {} }),
    } as EdgeEnv;
    expect(edgeSecret(env, "databaseUrl")).toBe("postgres://edge/db");
    expect(edgeSecret(env, "apiToken")).toBe("edge-token");
    expect(edgeSchema(env)).toBe("edge_jobs");
    expect(edgeConfig(env).edge.runners["edge-runner"]).toBeDefined();
    // No binding is named anywhere else in the Worker or in what binds it: a rename in EDGE_ENV (or ENV) reaches all.
    const bindingName = new RegExp(`\\b(${Object.values(EDGE_ENV).join("|")})\\b`);
    expect(codeLines([...sources("functions/edge"), "infra/edge.ts"], bindingName)).toEqual([]);
    // The grep finds a binding named by hand where there is one: the example route's own.
    expect(codeLines(["examples/edge-signup.ts"], bindingName).length).toBeGreaterThan(0);
  });
});
