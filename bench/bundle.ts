import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import type { Phase } from "./phases.ts";
import { percentile, round } from "./stats.ts";

/**
 * The runner Lambda's bundle: functions/runner.ts if it exists, else
 * bench/bundle-entry.ts (runWorker + createNeonPool + jobs/index.ts), bundled
 * and minified by esbuild as a Lambda deploy would, and its cold init: the
 * time a fresh node process takes to import it.
 */

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const OUT = fileURLToPath(new URL("./.work/bundle/runner.mjs", import.meta.url));

export async function measureBundle(repeats = 7) {
  const real = `${ROOT}functions/runner.ts`;
  const entry = existsSync(real) ? real : fileURLToPath(new URL("./bundle-entry.ts", import.meta.url));
  const result = await build({
    entryPoints: [entry],
    outfile: OUT,
    bundle: true,
    minify: true,
    format: "esm",
    platform: "node",
    target: "node22",
    external: ["pg-native"],
    // CommonJS dependencies that call require() need it defined in an ESM bundle.
    banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
    metafile: true,
    logLevel: "warning",
  });
  const bytes = readFileSync(OUT);
  const byPackage = new Map<string, number>();
  for (const [file, info] of Object.entries(result.metafile!.outputs[Object.keys(result.metafile!.outputs)[0]!]!.inputs)) {
    const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file);
    const key = m ? m[1]! : file.split("/")[0]!;
    byPackage.set(key, (byPackage.get(key) ?? 0) + info.bytesInOutput);
  }
  const top = [...byPackage].sort((a, b) => b[1] - a[1]).slice(0, 6).map(([k, v]) => ({ input: k, kb: round(v / 1024, 1) }));

  const url = pathToFileURL(OUT).href;
  const script = `const t = performance.now(); await import(${JSON.stringify(url)}); process.stdout.write(String(performance.now() - t));`;
  const importMs: number[] = [];
  const processMs: number[] = [];
  const baselineMs: number[] = [];
  for (let i = 0; i < repeats; i++) {
    let t = performance.now();
    execFileSync(process.execPath, ["--input-type=module", "-e", "0"]);
    baselineMs.push(performance.now() - t);
    t = performance.now();
    importMs.push(Number(execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" })));
    processMs.push(performance.now() - t);
  }
  const med = (v: number[]) => round(percentile(v, 50)!, 1);
  return {
    entry: entry.slice(ROOT.length),
    bundle_kb: round(bytes.length / 1024, 1),
    gzip_kb: round(gzipSync(bytes).length / 1024, 1),
    import_ms: med(importMs),
    process_ms: med(processMs),
    empty_node_ms: med(baselineMs),
    top_inputs: top,
  };
}

export const bundlePhase: Phase = {
  name: "bundle",
  title: "Runner bundle size and cold init",
  libs: ["leasehold"],
  once: true,
  run: () => measureBundle(),
  metrics: {
    bundle_kb: (r) => r.bundle_kb,
    gzip_kb: (r) => r.gzip_kb,
    import_ms: (r) => r.import_ms,
    process_ms: (r) => r.process_ms,
  },
};
