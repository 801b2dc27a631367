import { fileURLToPath } from "node:url";
import { build, type BuildOptions } from "esbuild";

/**
 * How an edge entry is bundled for Workers-like runtimes (workerd, Vercel
 * Edge, Deno Deploy): one ESM file, browser/worker package entries, no Node
 * platform. The tests run such bundles in workerd, and check that they import
 * no Node built-in; the benchmark runs one too.
 */
const root = fileURLToPath(new URL("..", import.meta.url));
const RELAY_PRELUDE = fileURLToPath(new URL("./edge-prelude.ts", import.meta.url));

/** What only a local bundle has: `wsProxy`, a WebSocket relay to a plain Postgres, built in (dev/edge-prelude.ts). */
export interface LocalEdgeOptions {
  wsProxy?: string;
}

export function edgeBuildOptions(entry: string, local: LocalEdgeOptions = {}): BuildOptions & { write: false } {
  const relay = local.wsProxy ? { inject: [RELAY_PRELUDE], define: { __LEASEHOLD_WS_RELAY__: JSON.stringify(local.wsProxy) } } : {};
  return {
    ...relay,
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
export async function bundleEdgeWorker(entry: string, local: LocalEdgeOptions = {}): Promise<string> {
  const result = await build(edgeBuildOptions(entry, local));
  return result.outputFiles[0]!.text;
}
