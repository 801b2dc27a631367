import { buildSync } from "esbuild";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { type Config } from "../shared/settings/config.ts";
import { functionSpecs, type FunctionSpec } from "../shared/settings/function-specs.ts";
import { ENTRY_KINDS, writeEntries } from "../functions/entries.ts";

const EXT = import.meta.url.endsWith(".js") ? ".js" : ".ts";
/** This package's handler factories, each its own module, as a path (local runs import them directly). */
const factoryModule = (kind: string) => fileURLToPath(new URL(`../functions/${kind}${EXT}`, import.meta.url));
/** What runs ahead of each local function: the local-only settings (dev/local-env.ts) applied. */
const PRELUDE = fileURLToPath(new URL(`./lambda/prelude${EXT}`, import.meta.url));

/**
 * The functions of an app as the local Lambda runtime runs them: the entries
 * the SST component deploys (functions/entries.ts), written for this config
 * and jobs module under `<root>/.leasehold/local/<hash>/`, then bundled
 * with esbuild as `sst deploy` bundles them (one ES module per function,
 * dependencies included), so a local cold start loads what a Lambda cold
 * start loads, as fast. One addition: a prelude (dev/lambda/prelude.ts) that
 * applies the local-only settings (the WebSocket relay, labelled output)
 * to the bundle's own modules before the handler loads. Rebuilt on every start: edits to the jobs show up.
 * Each build lands in a directory named by its content, moved into place
 * whole, so stacks starting at once never read each other's half-written files.
 */
export function localFunctions(o: { root: string; config: Config; jobsModule: string }): FunctionSpec[] {
  const jobsModule = resolve(o.root, o.jobsModule);
  const hash = createHash("sha256").update(JSON.stringify([o.config, jobsModule])).digest("hex").slice(0, 16);
  const dir = join(o.root, ".leasehold", "local", hash);
  const files = writeEntries({ dir, jobsModule, config: o.config, factories: factoryModule });
  const built = buildSync({
    write: false,
    entryPoints: Object.keys(ENTRY_KINDS).map((kind) => ({ in: files[kind as keyof typeof ENTRY_KINDS], out: kind })),
    outdir: join(dir, "out"),
    outExtension: { ".js": ".mjs" },
    inject: [PRELUDE],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // As infra deploys them (nodejs.splitting): dynamic imports in chunks of their own, compiled on first use. Each entry
    // imports its factory's own module, so code one function alone uses is in no chunk another loads.
    splitting: true,
    // Linked maps (the child enables them): a thrown error's stack names the app's own files and lines.
    sourcemap: "linked",
    sourcesContent: false,
    // CommonJS dependencies (the AWS SDK, pg) require() Node's built-ins.
    banner: { js: "import { createRequire as __leaseholdRequire } from 'node:module'; const require = __leaseholdRequire(import.meta.url);" },
    external: ["pg-native", "bufferutil", "utf-8-validate"],
    logLevel: "error",
  });
  const digest = createHash("sha256");
  for (const f of built.outputFiles) digest.update(basename(f.path)).update(f.contents);
  const bundles = join(dir, `bundle-${digest.digest("hex").slice(0, 16)}`);
  if (!existsSync(bundles)) {
    const staging = `${bundles}.${process.pid}.tmp`;
    mkdirSync(staging, { recursive: true });
    for (const f of built.outputFiles) writeFileSync(join(staging, basename(f.path)), f.contents);
    try {
      renameSync(staging, bundles);
    } catch {
      rmSync(staging, { recursive: true, force: true }); // another stack moved the same build in first
    }
  }
  return functionSpecs(o.config, relative(o.root, bundles).split(sep).join("/"));
}
