/**
 * The stack `sst deploy` would create, without AWS: the app's sst.config.ts
 * `run()` executed with SST's own component code (.sst/platform, as `sst
 * install` writes it) under Pulumi's mock runtime, bundled as the SST CLI
 * bundles it (its pkg/js: `$app`, `$cli`, `$dev` defined, the shim injected,
 * the provider globals imported), with the CLI's build service answered
 * locally (dev/synth/build-service.ts). Every resource SST would create is
 * recorded with its real inputs (dev/synth/mocks.ts); dev/synth/checks.ts
 * checks the graph. Offline and deterministic; a few seconds.
 */
import { build, type Plugin } from "esbuild";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { startBuildService, type BuiltFunction } from "./build-service.ts";
import type { SynthResource } from "./mocks.ts";

export interface SynthGraph {
  app: { name: string; stage: string };
  resources: SynthResource[];
  outputs: Record<string, unknown>;
  /** The functions the build service built, with their handlers and exports. */
  built: BuiltFunction[];
  /** The SST secrets the program read (placeholders stand in for their values). */
  secrets: string[];
}

export interface SynthOptions {
  root: string;
  stage?: string;
  /** Extra environment of the program (what a deploy's shell would have). */
  env?: Record<string, string>;
}

const DRIVER = fileURLToPath(new URL(`./driver${import.meta.url.endsWith(".js") ? ".js" : ".ts"}`, import.meta.url));
/** The SST CLI's externals when it bundles sst.config.ts. */
const EXTERNAL = ["@pulumi/*", "undici", "@pulumiverse/*", "@sst-provider/*", "@aws-sdk/*", "esbuild", "archiver", "glob", "vite"];
const BANNER = `import { createRequire as topLevelCreateRequire } from 'module';
const require = topLevelCreateRequire(import.meta.url);
import { fileURLToPath as topLevelFileUrlToPath, URL as topLevelURL } from "url"
const __filename = topLevelFileUrlToPath(import.meta.url)
const __dirname = topLevelFileUrlToPath(new topLevelURL(".", import.meta.url))
`;

/** The SST platform of the app, or an error saying how to install it. */
export function platformOf(root: string): string {
  const platform = join(root, ".sst", "platform");
  for (const needed of ["src/auto/run.ts", "src/shim/run.js", "node_modules/@pulumi/pulumi/package.json"]) {
    if (!existsSync(join(platform, needed))) {
      throw new Error(`synth: ${join(platform, needed)} is missing: install SST's platform first (\`npx leasehold check --platform-only\`, or scripts/check-infra.sh --platform-only in this repository)`);
    }
  }
  return platform;
}

/** What sst.config.ts's `app()` returns for the stage, as the SST CLI reads it before the program. */
async function readApp(root: string, dir: string, stage: string): Promise<Record<string, unknown>> {
  const file = join(dir, "app.mjs");
  await build({
    stdin: { contents: `import c from ${JSON.stringify(join(root, "sst.config.ts"))};\nexport default c.app({ stage: ${JSON.stringify(stage)} });`, resolveDir: root, loader: "ts" },
    banner: { js: "const $config = (input) => input;" }, bundle: true, format: "esm", platform: "node", outfile: file, logLevel: "silent",
    // Only the config's own module: what `run()` imports is not evaluated here.
    plugins: [{ name: "config-only", setup: (b) => b.onResolve({ filter: /.*/ }, (a) => (a.importer.endsWith("sst.config.ts") ? { path: a.path, external: true } : undefined)) }],
  });
  return ((await import(pathToFileURL(file).href)) as { default: Record<string, unknown> }).default;
}

/** Prepends the provider globals to every file outside .sst, as the SST CLI's InjectGlobals plugin does. */
function injectGlobals(globals: string): Plugin {
  return {
    name: "InjectGlobals",
    setup(b) {
      b.onLoad({ filter: /\.(js|ts|jsx|tsx)$/ }, (args) => {
        const contents = readFileSync(args.path, "utf8");
        const ext = args.path.split(".").pop()!;
        return { contents: args.path.includes(".sst") ? contents : `${globals}\n${contents}`, loader: ext as "js" | "ts" | "jsx" | "tsx" };
      });
    },
  };
}

async function bundleProgram(root: string, platform: string, dir: string, app: Record<string, unknown>, cli: Record<string, unknown>): Promise<string> {
  // The home provider is always there, as the SST CLI adds it to the app's providers.
  const home = typeof app.home === "string" && app.home !== "local" ? [app.home] : [];
  const providers = [...new Set([...home, ...Object.keys((app.providers ?? {}) as object)])];
  const globals = [
    ...providers.map((p) => `import * as ${p} from "@pulumi/${p}";`),
    `import * as sst from ${JSON.stringify(join(platform, "src/components"))};`,
  ].join("\n");
  const file = join(dir, "program.mjs");
  await build({
    stdin: {
      contents: `import { run } from ${JSON.stringify(join(platform, "src/auto/run.ts"))};\nimport mod from ${JSON.stringify(join(root, "sst.config.ts"))};\nconst result = await run(mod.run);\nexport default result;`,
      resolveDir: root, sourcefile: "eval.ts", loader: "ts",
    },
    banner: { js: BANNER }, mainFields: ["module", "main"], format: "esm", platform: "node", bundle: true, outfile: file,
    nodePaths: [join(platform, "node_modules")], external: EXTERNAL, plugins: [injectGlobals(globals)],
    define: { $app: JSON.stringify(app), $cli: JSON.stringify(cli), $dev: "false" }, inject: [join(platform, "src/shim/run.js")],
    logLevel: "silent",
  });
  await build({ entryPoints: [DRIVER], bundle: true, format: "esm", platform: "node", outfile: join(dir, "driver.mjs"), external: ["@pulumi/*"], logLevel: "silent" });
  return file;
}

/** Synthesizes the app at `root`; throws with the program's errors when it fails. */
export async function synthesize(options: SynthOptions): Promise<SynthGraph> {
  const o = { ...options, root: resolve(options.root) };
  const stage = o.stage ?? "synth";
  const platform = platformOf(o.root);
  mkdirSync(join(platform, ".synth"), { recursive: true });
  const dir = mkdtempSync(join(platform, ".synth", "run-"));
  const work = mkdtempSync(join(tmpdir(), "leasehold-synth-"));
  const service = await startBuildService(o.root, work);
  try {
    const config = await readApp(o.root, dir, stage);
    const app = { ...config, stage, version: "", watch: null, backend: "", removalPolicy: "" };
    const cli = { command: "deploy", dev: false, paths: { home: join(work, "home"), root: o.root, work, platform }, state: { version: {} } };
    const program = await bundleProgram(o.root, platform, dir, app, cli);
    const graphFile = join(dir, "graph.json");
    const { code, output } = await runDriver(join(dir, "driver.mjs"), [program, graphFile, String(config.name), stage], o.root, {
      ...process.env, ...o.env, SST_SERVER: service.url, PULUMI_CONFIG_PASSPHRASE: "", NODE_OPTIONS: "--no-deprecation --no-warnings",
    });
    const graph = existsSync(graphFile) ? (JSON.parse(readFileSync(graphFile, "utf8")) as Omit<SynthGraph, "app" | "built"> & { failures: string[] }) : null;
    if (code !== 0 || !graph) throw new Error(`synth: the program failed:\n${[...(graph?.failures ?? []), output.trim()].filter(Boolean).join("\n")}`);
    return { app: { name: String(config.name), stage }, resources: graph.resources, outputs: graph.outputs ?? {}, built: service.built, secrets: graph.secrets };
  } finally {
    await service.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
}

function runDriver(driver: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [driver, ...args], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, output }));
  });
}

/** `tsx dev/synth/synth.ts [root]`: prints a summary of the graph. */
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const graph = await synthesize({ root: process.argv[2] ?? process.cwd() });
  const counts = new Map<string, number>();
  for (const r of graph.resources) counts.set(r.type, (counts.get(r.type) ?? 0) + 1);
  console.log(`${graph.resources.length} resources`);
  for (const [type, n] of [...counts].sort()) console.log(`  ${n}  ${type}`);
  writeFileSync(join(tmpdir(), "leasehold-synth-graph.json"), JSON.stringify(graph, null, 2));
}
