import { fileURLToPath } from "node:url";
import { build, type BuildOptions } from "esbuild";

/**
 * How an edge entry is bundled for Workers-like runtimes (workerd, Vercel
 * Edge, Deno Deploy): one ESM file, browser/worker package entries, no Node
 * platform. The tests run such bundles in workerd, and check that they import
 * no Node built-in; the benchmark runs one too.
 */
const root = fileURLToPath(new URL("..", import.meta.url));

export function edgeBuildOptions(entry: string): BuildOptions & { write: false } {
  return {
    absWorkingDir: root,
    entryPoints: [entry],
    bundle: true,
    write: false,
    format: "esm",
    platform: "neutral",
    mainFields: ["module", "main"],
    conditions: ["workerd", "worker", "browser"],
    logLevel: "silent",
  };
}

/** The bundle of `entry` (relative to the repository), as module text for miniflare. */
export async function bundleEdgeWorker(entry: string): Promise<string> {
  const result = await build(edgeBuildOptions(entry));
  return result.outputFiles[0]!.text;
}
