import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { build } from "esbuild";
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../dev/embedded-postgres.ts";
import { runChecks } from "../dev/synth/checks.ts";
import { allows, Graph } from "../dev/synth/graph.ts";
import { synthesize } from "../dev/synth/synth.ts";
import { readManifest, unusedFiles } from "../scripts/package-files.ts";
import { docSnippets, writeSnippetApp } from "./support/doc-snippets.ts";
import { installApp, linkPlatform, packLeasehold, PLATFORM, ROOT, run, type Packed } from "./support/packed.ts";

/**
 * Leasehold as an outside app gets it: `npm pack` builds the package, a small
 * SST app (test/fixtures/app: its own config on its own schema, its own job
 * types, a Hono route that enqueues in its own transaction) installs the
 * tarball, and then it type-checks, synthesizes (SST's component code under
 * Pulumi's mock runtime, the real component), bundles, runs with `npx leasehold dev` and answers
 * `npx leasehold stats`: nothing of this repository but the tarball.
 */
const root = ROOT;
const platform = PLATFORM;


describe("the packed package in an outside SST app", () => {
  let work: string;
  let app: string;
  let packed: Packed;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "leasehold-pack-"));
    packed = await packLeasehold(work);
    const tarball = packed.tarball;
    app = join(work, "acme");
    cpSync(join(root, "test/fixtures/app"), app, { recursive: true });
    const manifest = readFileSync(join(app, "package.json"), "utf8").replace("LEASEHOLD_TARBALL", tarball);
    writeFileSync(join(app, "package.json"), manifest);
    await installApp(app);
    linkPlatform(app);
  }, 900_000);
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("ships only what an app uses: every file is imported, named or read from an entry point, and the tarball stays small", () => {
    const paths = packed.files.map((f) => f.path);
    // From `exports` and `bin`, following every import (types too) and `new URL(..., import.meta.url)`.
    expect(unusedFiles(paths, readManifest(root), root)).toEqual([]);
    expect(paths.filter((p) => !/^(dist\/|docs\/[^/]+\.md$|README\.md$|package\.json$|cli\/bin\.mjs$)/.test(p))).toEqual([]);
    expect(paths.filter((p) => p.startsWith("dist/.sst/") || p === "dist/.built")).toEqual([]);
    expect(paths).toEqual(expect.arrayContaining(["dist/shared/index.js", "dist/shared/index.d.ts", "dist/infra/component.d.ts", "dist/dev/lambda/child.js", "dist/migrations/0001_jobs.sql"]));
    // 171 files, 197 kB packed, 606 kB unpacked when this was written (3.1 MB unpacked with SST's platform sources in it);
    // 234 files, 305 kB packed, 941 kB unpacked with rate limits, the runner in its parts and the synthesized deploy check
    // (a third of it the docs, which ship so the README's links resolve);
    // 327 kB packed, 1,006 kB unpacked after issue 24's measurements went into docs/internals.md (99 kB of text, linked from the README).
    // 341 kB with the levers' working notes in it too (CI failed here); they moved to bench/levers.md, which does not ship: 332 kB, 1,021 kB.
    // 251 with leasehold/zod (shared/zod.ts), the namespace an app's schemas import so that a bundle holds only the zod they use.
    expect(packed.files.length).toBeLessThan(260);
    expect(packed.size).toBeLessThan(340_000);
    expect(packed.unpackedSize).toBeLessThan(1_100_000);
  });

  it("installs only the package: no path back into this repository", () => {
    const installed = JSON.parse(readFileSync(join(app, "node_modules/leasehold/package.json"), "utf8")) as { exports: Record<string, unknown> };
    expect(Object.keys(installed.exports)).toEqual(expect.arrayContaining([".", "./lambda", "./sst", "./waker", "./edge", "./zod"]));
    expect(existsSync(join(app, "node_modules/leasehold/dist/migrations/0001_jobs.sql"))).toBe(true);
    expect(existsSync(join(app, "node_modules/leasehold/test"))).toBe(false);
  });

  it("the app's sst.config.ts, config, jobs and route type-check against SST's real component types", async () => {
    const result = await run(join(platform, "node_modules/.bin/tsc"), ["-p", join(app, "tsconfig.json")], { cwd: app }).catch((e: { stdout: string }) => e);
    expect("stdout" in result ? result.stdout : "").toBe("");
  }, 300_000);

  it("every TypeScript block of README.md and docs/*.md type-checks from outside, against the packed package's types", async () => {
    const { checked, notChecked } = docSnippets(root);
    // A fragment on purpose is marked `<!-- not checked: reason -->`; there are few.
    expect(notChecked.length).toBeLessThanOrEqual(2);
    expect(checked.map((s) => s.path)).toEqual(expect.arrayContaining(["leasehold.config.ts", "src/jobs.ts"]));
    const tsconfig = writeSnippetApp(join(app, "docs-snippets"), checked, join(app, ".sst/platform/config.d.ts"));
    const result = await run(join(platform, "node_modules/.bin/tsc"), ["-p", tsconfig], { cwd: join(app, "docs-snippets") }).catch((e: { stdout: string }) => e);
    const shownAt = checked.map((s) => `${s.path}: ${s.at}`).join("\n");
    expect("stdout" in result ? result.stdout : "", `the blocks, by file:\n${shownAt}`).toBe("");
  }, 300_000);

  it("synthesizes as `sst deploy` would (SST's component code, Pulumi's mock runtime): the component from the app's config, every check holds, every function bundles offline", async () => {
    const graph = new Graph(await synthesize({ root: app, stage: "test" }));
    expect([...runChecks(graph)]).toEqual([]);
    const functions = graph.functions();
    expect(functions.map((f) => f.name).sort()).toEqual(["AcmeApi", "Api", "Migrate", "Rescuer", "Runner", "Scheduler"]);
    for (const f of functions.filter((f) => f.name !== "AcmeApi")) {
      expect(f.env.LEASEHOLD_SCHEMA, f.name).toBe("acme_jobs");
      expect(f.lambda.handler, f.name).toMatch(/^\.leasehold\/functions\/\w+\.handler$/);
    }
    const ticks = graph.all("aws:scheduler/schedule:Schedule").filter((s) => s.inputs.target.input !== "{}");
    expect(ticks.map((s) => JSON.parse(s.inputs.target.input).name)).toEqual(["acme.nightly"]);
    // The app's own function, linked to the component: its link, and the right to wake the scheduler.
    const acme = functions.find((f) => f.name === "AcmeApi")!;
    expect(graph.synth.built.find((b) => b.functionID === "AcmeApi")!.links).toContain("Leasehold");
    expect(allows(acme.role, "lambda:InvokeFunction", graph.kind("scheduler")[0]!.arn)).toBe(true);

    for (const f of functions) {
      const entry = join(app, String(f.lambda.handler).replace(/\.handler$/, ".ts"));
      const text = readFileSync(entry, "utf8");
      if (f.name !== "AcmeApi") expect(text).toContain(`from "leasehold/lambda"`);
      const out = await build({ entryPoints: [entry], absWorkingDir: app, bundle: true, platform: "node", format: "esm", target: "node22", write: false, metafile: true, logLevel: "silent" });
      const bundled = out.outputFiles[0]!.text;
      expect(bundled, f.name).toContain("handler");
      expect(bundled, `${f.name} bundles nothing from this repository`).not.toContain(root);
      // The app's schemas import `* as z from "leasehold/zod"`, and Leasehold's own code too: a cold start compiles
      // the zod its schemas use, not all of it (its 40 locales other than English are about 400 kB).
      const bundledFrom = Object.entries(Object.values(out.metafile.outputs)[0]!.inputs).filter(([, i]) => i.bytesInOutput > 0);
      const zod = bundledFrom.map(([p]) => p).filter((p) => p.includes("node_modules/zod/"));
      if (f.name === "Runner") expect(zod.length, "zod's modules in the runner").toBeGreaterThan(0);
      if (f.name !== "AcmeApi" && f.name !== "Api") expect(zod.filter((p) => p.includes("/locales/") && !p.endsWith("/en.js")), f.name).toEqual([]);
    }
  }, 600_000);

  describe("npx leasehold dev", () => {
    let dev: ChildProcess;
    let output = "";
    let pgPort: number;
    const token = "acme-dev-token-0123456789abcdef";
    beforeAll(async () => {
      const dataDir = join(work, "pg");
      mkdirSync(dataDir);
      chmodSync(work, 0o755);
      [pgPort] = [await freePort()];
      dev = spawn("npx", ["leasehold", "dev"], {
        cwd: app,
        env: {
          ...process.env, DATABASE_URL: "", PORT: "0", LEASEHOLD_API_TOKEN: token, LEASEHOLD_SCHEMA: "",
          LEASEHOLD_DEV_PG_PORT: String(pgPort), LEASEHOLD_DEV_DATA_DIR: join(dataDir, "data"),
        },
        stdio: ["ignore", "pipe", "pipe"],
        // Its own process group, as in a terminal: Ctrl-C signals the whole group.
        detached: true,
      });
      dev.stdout!.on("data", (d) => (output += d));
      dev.stderr!.on("data", (d) => (output += d));
      const deadline = Date.now() + 120_000;
      while (!output.includes("Ctrl-C stops everything")) {
        if (Date.now() > deadline || dev.exitCode !== null) throw new Error(`leasehold dev did not start:\n${output}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }, 150_000);
    afterAll(async () => {
      if (dev && dev.exitCode === null) {
        const exited = new Promise((r) => dev.on("exit", r));
        process.kill(-dev.pid!, "SIGINT");
        await exited;
      }
    });

    it("runs the app's own job types: its route enqueues in its own transaction, a runner built from its jobs module runs it", async () => {
      expect(output).toMatch(/job types\s+acme\.welcome, acme\.nightly/);
      const apiUrl = output.match(/API\s+(http:\/\/127\.0\.0\.1:\d+)/)![1]!;
      const lambdaUrl = output.match(/Lambda\s+(http:\/\/127\.0\.0\.1:\d+)/)![1]!;
      const databaseUrl = `postgres://postgres:leasehold@127.0.0.1:${pgPort}/postgres`;
      const { createAcmeApp } = (await import(/* @vite-ignore */ pathToFileURL(join(app, "src/api.ts")).href)) as {
        createAcmeApp(openPool: () => pg.Pool, schema: string, afterCommit: () => void): { request(path: string, init: RequestInit): Promise<Response> };
      };
      const lambda = new LambdaClient({ endpoint: lambdaUrl, region: "us-east-1", credentials: { accessKeyId: "local", secretAccessKey: "local" } });
      const wake = () => void lambda.send(new InvokeCommand({ FunctionName: "scheduler", InvocationType: "Event", Payload: JSON.stringify({ source: "leasehold.wake" }) }));
      const route = createAcmeApp(() => new pg.Pool({ connectionString: databaseUrl, max: 1 }), "acme_jobs", wake);
      const res = await route.request("/signup", {
        method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ email: "ada@example.com", name: "Ada" }),
      });
      expect(res.status).toBe(201);
      const { jobId } = (await res.json()) as { jobId: string };

      let job: { status: string; result?: unknown } = { status: "queued" };
      const deadline = Date.now() + 60_000;
      while (job.status !== "succeeded" && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 300));
        job = (await (await fetch(`${apiUrl}/v1/jobs/${jobId}`, { headers: { authorization: `Bearer ${token}` } })).json()) as typeof job;
      }
      // Only a runner built from the app's jobs module knows acme.welcome: any other leaves it queued.
      expect(job).toMatchObject({ status: "succeeded", name: "acme.welcome" });
      lambda.destroy();

      // The app's schema, from its config: nothing in the default one.
      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      try {
        const schemas = (await db.query<{ nspname: string }>("select nspname from pg_namespace where nspname in ('acme_jobs', 'leasehold')")).rows;
        expect(schemas.map((r) => r.nspname)).toEqual(["acme_jobs"]);
      } finally {
        await db.end();
      }
    }, 120_000);

    it("`npx leasehold enqueue` and `npx leasehold stats` in the app's directory use the app's jobs, config and schema", async () => {
      const env = { ...process.env, DATABASE_URL: `postgres://postgres:leasehold@127.0.0.1:${pgPort}/postgres`, LEASEHOLD_SCHEMA: "" };
      await run("npx", ["leasehold", "enqueue", "acme.welcome", JSON.stringify({ email: "bob@example.com", name: "Bob" }), "--delay", "1h"], { cwd: app, env });
      const refused = await run("npx", ["leasehold", "enqueue", "acme.welcome", JSON.stringify({ email: "not-an-email", name: "Bob" })], { cwd: app, env })
        .then(() => null, (e: { code: number; stderr: string }) => e);
      expect(refused?.code).toBe(2);
      expect(refused?.stderr).toMatch(/email/);
      const { stdout } = await run("npx", ["leasehold", "stats", "--json"], { cwd: app, env });
      const stats = JSON.parse(stdout) as { queues: { queue: string; delayed: number; unserved: number }[] };
      expect(stats.queues).toEqual([expect.objectContaining({ queue: "default", delayed: 1, unserved: 0 })]);
    }, 60_000);
  });
});
