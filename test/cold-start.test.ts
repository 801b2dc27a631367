import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
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

  it("bundles none of the API's modules, nor the AWS SDK, into what a runner loads at start", () => {
    const specs = localFunctions({
      root,
      config: defineConfig({}),
      jobsModule: fileURLToPath(new URL("./fixtures/e2e-jobs.ts", import.meta.url)),
    });
    const handler = specs.find((s) => s.name === "runner")!.handler;
    const dir = join(root, handler.slice(0, handler.lastIndexOf("/")));
    // A function's file and the chunks it imports statically, transitively: what its cold start compiles and runs.
    const loadedAtStart = (file: string, seen = new Set<string>()): Set<string> => {
      if (seen.has(file)) return seen;
      seen.add(file);
      const text = readFileSync(join(dir, file), "utf8");
      for (const m of text.matchAll(/^import\s*(?:[^"'()]*?\sfrom\s*)?["']\.\/([^"']+)["'];?$/gm)) loadedAtStart(m[1]!, seen);
      return seen;
    };
    // esbuild heads each module it bundles with a comment naming its file.
    const modules = (files: Iterable<string>) =>
      [...files].flatMap((f) => [...readFileSync(join(dir, f), "utf8").matchAll(/^\/\/ (\S+\.[cm]?[jt]s)$/gm)].map((m) => m[1]!));
    const runner = modules(loadedAtStart("runner.mjs"));
    const api = modules(loadedAtStart("api.mjs"));
    const everything = modules(readdirSync(dir).filter((f) => f.endsWith(".mjs")));
    const fromApi = (m: string) => m.startsWith("functions/api/") || m.includes("node_modules/hono/") || m.includes("zod-to-openapi");
    const fromSdk = (m: string) => m.includes("node_modules/@aws-sdk/client-lambda/");
    expect(runner).toContain("shared/runner/worker.ts");
    expect(api.filter(fromApi).length).toBeGreaterThan(0);
    expect(runner.filter(fromApi)).toEqual([]);
    // The SDK is in the bundle, in a chunk of its own that the runner imports on its first wake-up.
    expect(everything.filter(fromSdk).length).toBeGreaterThan(0);
    expect(runner.filter(fromSdk)).toEqual([]);
  });
});
