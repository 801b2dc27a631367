import { build, type Message } from "esbuild";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { CliError, EXIT } from "./errors.ts";
import { runChecks } from "../dev/synth/checks.ts";
import { Graph } from "../dev/synth/graph.ts";
import { synthesize } from "../dev/synth/synth.ts";

/**
 * The offline check of an app's infrastructure (`leasehold check`, and
 * scripts/check-infra.sh for this repository): no AWS account, no deploy.
 *
 * 1. The SST platform in `.sst/platform`, installed by `sst install` when it
 *    is missing or for another sst version, with the variables that let it
 *    run offline from the npm cache (no Bun, no dependency check, no telemetry).
 * 2. `sst.config.ts` and everything it imports (the component's arguments,
 *    the app's config and jobs) type-checked against SST's real component
 *    types, with the platform's own TypeScript.
 * 3. `sst.config.ts` bundled with esbuild, as `sst deploy` bundles it, so an
 *    import that does not resolve fails here too.
 * 4. The stack synthesized: `run()` with SST's own component code under
 *    Pulumi's mock runtime (dev/synth/synth.ts), and the checks of
 *    dev/synth/checks.ts on every resource it would create.
 * Each problem is printed as `file:line:column: message`.
 */

/** What `sst install` and the platform need to run without the network or Bun. */
export const OFFLINE_SST_ENV = { SST_SKIP_DEPENDENCY_CHECK: "1", SST_NO_BUN: "1", SST_TELEMETRY_DISABLED: "1", DO_NOT_TRACK: "1" } as const;

/** Where the check keeps its tsconfig, among the other generated files. */
const CHECK_DIR = join(".leasehold", "check");

/** The compiler options of the check, those of this repository's infra/tsconfig.json. */
const COMPILER_OPTIONS = {
  target: "ES2022",
  module: "ESNext",
  moduleResolution: "Bundler",
  lib: ["ES2023"],
  strict: true,
  esModuleInterop: true,
  skipLibCheck: true,
  forceConsistentCasingInFileNames: true,
  isolatedModules: true,
  allowImportingTsExtensions: true,
  noEmit: true,
  types: [],
};

export interface CheckOptions {
  root: string;
  /** Only make sure the platform is installed (the repository's build needs its types). */
  platformOnly?: boolean;
  /** SST's stage while installing (default: $SST_STAGE, else test). */
  stage?: string;
  progress(line: string): void;
}

/** Runs the check; throws a CliError (exit 1) naming how many problems it printed. */
export async function checkInfra(o: CheckOptions): Promise<void> {
  const config = join(o.root, "sst.config.ts");
  if (!o.platformOnly && !existsSync(config)) throw new CliError(EXIT.usage, `no sst.config.ts in ${o.root}: run \`leasehold check\` in the app's directory`, "usage");
  const platform = await ensurePlatform(o);
  if (o.platformOnly) return;
  o.progress("check: type-checking sst.config.ts and what it imports, against SST's component types");
  const typeErrors = await typeCheck(o.root, platform);
  o.progress("check: bundling sst.config.ts, as sst deploy does");
  const bundleErrors = await bundle(o.root, config);
  const problems = [...typeErrors, ...bundleErrors];
  if (problems.length === 0) {
    o.progress("check: synthesizing the stack with SST's component code (Pulumi's mock runtime, no AWS)");
    problems.push(...(await synthProblems(o)));
  }
  if (problems.length > 0) {
    process.stderr.write(`${problems.join("\n")}\n`);
    throw new CliError(EXIT.failed, `check failed: ${problems.length} problem${problems.length === 1 ? "" : "s"} (above)`, "check_failed", { problems });
  }
  o.progress("check: ok");
}

/** The synthesized stack's failed checks, each problem as `check: <check>: <problem>`; or why it could not be synthesized. */
async function synthProblems(o: CheckOptions): Promise<string[]> {
  let graph: Graph;
  try {
    graph = new Graph(await synthesize({ root: o.root, stage: o.stage ?? "check" }));
  } catch (err) {
    return [(err as Error).message];
  }
  o.progress(`check: ${graph.resources.length} resources; checking them`);
  return [...runChecks(graph)].flatMap(([name, found]) => found.map((p) => `check: ${name}: ${p}`));
}

/** `.sst/platform`, installed for the app's sst version if it is not there yet. Returns its path. */
async function ensurePlatform(o: CheckOptions): Promise<string> {
  const platform = join(o.root, ".sst", "platform");
  const sstManifest = join(o.root, "node_modules", "sst", "package.json");
  if (!existsSync(sstManifest)) throw new CliError(EXIT.usage, `sst is not installed in ${o.root}: \`npm install sst\` first`, "usage");
  const wanted = (JSON.parse(readFileSync(sstManifest, "utf8")) as { version: string }).version;
  const installed = existsSync(join(platform, "version")) ? readFileSync(join(platform, "version"), "utf8").trim() : "";
  if (existsSync(join(platform, "node_modules", ".bin", "tsc")) && installed === wanted) return platform;
  o.progress(`check: installing the SST ${wanted} platform into .sst/platform (sst install)`);
  const env = { ...process.env, ...OFFLINE_SST_ENV, SST_STAGE: o.stage ?? process.env.SST_STAGE ?? "test" };
  const { code, output } = await runTool("npx", ["--no-install", "sst", "install"], o.root, env);
  if (code !== 0) throw new CliError(EXIT.failed, `sst install failed (exit ${code}):\n${output.trim()}`, "sst_install_failed");
  return platform;
}

/** The platform's tsc on sst.config.ts; each error as `file:line:column: error TSxxxx: message`. */
async function typeCheck(root: string, platform: string): Promise<string[]> {
  const dir = join(root, CHECK_DIR);
  mkdirSync(dir, { recursive: true });
  const fromDir = (path: string) => relative(dir, path).split("\\").join("/");
  const tsconfig = {
    compilerOptions: COMPILER_OPTIONS,
    files: [fromDir(join(platform, "config.d.ts")), fromDir(join(root, "sst.config.ts"))],
  };
  writeFileSync(join(dir, "tsconfig.json"), `${JSON.stringify(tsconfig, null, 2)}\n`);
  const tsc = join(platform, "node_modules", ".bin", "tsc");
  const { code, output } = await runTool(tsc, ["-p", join(dir, "tsconfig.json"), "--pretty", "false"], root, process.env);
  if (code === 0) return [];
  const lines = output.split("\n").filter((l) => l.trim() !== "");
  // `file(line,col): error ...` → `file:line:col: error ...` (continuation lines kept as they are).
  const formatted = lines.map((l) => l.replace(/^(.+?)\((\d+),(\d+)\): /, "$1:$2:$3: "));
  return formatted.length > 0 ? formatted : [`tsc exited with ${code}`];
}

/** sst.config.ts bundled (nothing written); each error as `file:line:column: message`. */
async function bundle(root: string, config: string): Promise<string[]> {
  try {
    const result = await build({
      entryPoints: [config], absWorkingDir: root, bundle: true, platform: "node", format: "esm", write: false, logLevel: "silent",
    });
    return result.errors.map(describe);
  } catch (err) {
    const errors = (err as { errors?: Message[] }).errors;
    if (!errors) throw err;
    return errors.map(describe);
  }
}

function describe(m: Message): string {
  const where = m.location ? `${m.location.file}:${m.location.line}:${m.location.column + 1}: ` : "";
  return `${where}error: ${m.text}`;
}

/** A child process's exit code and its stdout and stderr together. */
function runTool(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, output }));
  });
}
