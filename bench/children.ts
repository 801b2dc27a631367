import { spawn, type ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import type { ChildArgs } from "./child-io.ts";
import { now, round } from "./stats.ts";

/**
 * Worker children run as plain `node` on an esbuild bundle of
 * bench/worker-child.ts (packages left external, one lazily loaded chunk per
 * library), not under tsx: a TypeScript loader in the child would inflate its
 * peak RSS and start-up, and the peers run as plain JavaScript. The Leasehold
 * code in that bundle is the real shared/ code, compiled.
 */

const ROOT = fileURLToPath(new URL("../", import.meta.url));
// One output folder per driver process: a smoke test and a bench may build at the same time.
const OUT_DIR = fileURLToPath(new URL(`./.work/child-${process.pid}/`, import.meta.url));
let built: Promise<string> | null = null;

export function buildChildren(): Promise<string> {
  built ??= build({
    entryPoints: [fileURLToPath(new URL("./worker-child.ts", import.meta.url))],
    outdir: OUT_DIR,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    packages: "external",
    logLevel: "warning",
  }).then(() => `${OUT_DIR}worker-child.js`);
  return built;
}

const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const c of live) c.kill("SIGKILL");
  if (built) rmSync(OUT_DIR, { recursive: true, force: true });
});

export type ChildLib = "leasehold" | "graphile" | "pgboss";
export type ChildMode = "exec" | "hop" | "drain";

/** Spawns one worker child (killed if this process exits first); stdin is a pipe when `input`. */
export async function spawnWorkerChild(lib: ChildLib, mode: ChildMode, args: ChildArgs, input = false): Promise<ChildProcess> {
  const script = await buildChildren();
  // BENCH_CHILD_CPU_PROF=<dir>: each child writes a V8 CPU profile there (bench/cpu-profile.ts reads them).
  const prof = process.env.BENCH_CHILD_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CHILD_CPU_PROF}`] : [];
  const child = spawn(process.execPath, [...prof, script, lib, mode, JSON.stringify(args)], {
    cwd: ROOT,
    env: { ...process.env, NO_LOG_SUCCESS: "1" },
    stdio: [input ? "pipe" : "ignore", "pipe", "inherit"],
  });
  live.add(child);
  child.on("exit", () => live.delete(child));
  return child;
}

/** Runs one worker child, waits for its RESULT line, and returns it with `child_wall_ms` and `pid`. */
export async function runChild<T extends object>(
  lib: ChildLib,
  mode: ChildMode,
  args: ChildArgs,
  timeoutMs = 600_000,
): Promise<T & { child_wall_ms: number; pid: number }> {
  const child = await spawnWorkerChild(lib, mode, args);
  return new Promise((resolve, reject) => {
    const t0 = now();
    let out = "";
    let timedOut = false;
    child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      const line = out.split("\n").reverse().find((l) => l.startsWith("RESULT "));
      if (timedOut) return reject(new Error(`${lib} ${mode}: timed out after ${timeoutMs} ms`));
      if (code !== 0 || !line) return reject(new Error(`${lib} ${mode}: exit ${code ?? signal}; stdout: ${out.slice(-2000)}`));
      resolve({ ...(JSON.parse(line.slice(7)) as T), child_wall_ms: round(now() - t0, 1), pid: child.pid! });
    });
  });
}
