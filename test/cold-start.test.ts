import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { localFunctions } from "../dev/functions.ts";
import { defineConfig } from "../shared/settings/config.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

/**
 * What a cold runner loads: every module of its bundle is compiled and run
 * before its first claim, so the runner's entry must not pull in the API
 * (hono, the OpenAPI schemas) through the handler factories' barrel, nor
 * the AWS SDK, which it needs only when it wakes the scheduler.
 */
describe("a cold runner loads only what it runs", () => {
  /** The `@aws-sdk/client-lambda` modules loaded after importing `module` (from source) in a fresh process. */
  const sdkModulesAfterImport = (module: string) =>
    Number(execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", `
      import { createRequire } from "node:module";
      await import(${JSON.stringify(join(root, module))});
      const cache = createRequire(import.meta.url).cache;
      console.log(Object.keys(cache).filter((k) => k.includes("@aws-sdk/client-lambda")).length);
    `], { cwd: root, encoding: "utf8" }).trim());

  it("loads the Lambda client on the first wake-up, not with the runner's module", () => {
    expect(sdkModulesAfterImport("functions/runner.ts")).toBe(0);
    // The probe sees the SDK where a module does load it.
    expect(sdkModulesAfterImport("functions/waker.ts")).toBeGreaterThan(0);
  });

  it("bundles none of the API's modules into the runner (the package's sideEffects list)", () => {
    const specs = localFunctions({
      root,
      config: defineConfig({}),
      jobsModule: fileURLToPath(new URL("./fixtures/e2e-jobs.ts", import.meta.url)),
    });
    const bundle = (name: string) => {
      const handler = specs.find((s) => s.name === name)!.handler;
      return readFileSync(join(root, `${handler.slice(0, handler.lastIndexOf("."))}.mjs`), "utf8");
    };
    // esbuild heads each module it bundles with a comment naming its file.
    const modules = (text: string) => [...text.matchAll(/^\/\/ (\S+\.[cm]?[jt]s)$/gm)].map((m) => m[1]!);
    const runner = modules(bundle("runner"));
    const api = modules(bundle("api"));
    const fromApi = (m: string) => m.startsWith("functions/api/") || m.includes("node_modules/hono/") || m.includes("zod-to-openapi");
    expect(api.filter(fromApi).length).toBeGreaterThan(0);
    expect(runner.filter(fromApi)).toEqual([]);
    expect(runner).toContain("shared/runner/worker.ts");
  });
});
