/**
 * The part of the SST CLI that SST's components call while a program runs:
 * an HTTP JSON-RPC server (`$SST_SERVER/rpc`, the client is
 * .sst/platform/src/components/rpc/rpc.ts). It answers `Runtime.Build` with
 * the esbuild build the SST CLI performs for a Node.js function (its
 * pkg/runtime/node/build.go: one ES module per handler, bundled, `keepNames`,
 * target esnext, the createRequire banner, `sharp` and `pg-native` external),
 * and `Provider.Aws.Bootstrap` with the names of the bootstrap bucket and
 * registry (an account's, which only `sst deploy` creates). Every other
 * method is answered as the CLI answers an unknown one.
 */
import { build, type Metafile } from "esbuild";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { basename, dirname, extname, join, relative, resolve } from "node:path";

/** One function as the service built it: what the synthesized stack is checked against. */
export interface BuiltFunction {
  functionID: string;
  /** The handler Lambda is given, relative to `out`. */
  handler: string;
  out: string;
  /** The handler's module in `out`, and what it exports (esbuild's metafile). */
  module: string;
  exports: string[];
  /**
   * The source files a cold start compiles and runs: those of the handler's module and of the chunks it imports
   * statically, transitively (a chunk it imports dynamically is loaded on first use), as paths from the app's root.
   */
  loadsAtStart: string[];
  /** Every source file in the bundle, loaded at start or not. */
  bundled: string[];
  /** What the function is linked to (SST's links: the resources its code may read). */
  links: string[];
}

interface BuildInput {
  functionID: string;
  handler: string;
  runtime?: string;
  isContainer?: boolean;
  links?: Record<string, unknown>;
  properties?: { install?: string[]; esbuild?: { external?: string[] }; minify?: boolean; banner?: string; splitting?: boolean };
}

type BuildResult = { handler: string; out: string; errors: string[]; sourcemaps: string[] };

const NODE_EXTENSIONS = [".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs"];
const FORCE_EXTERNAL = ["sharp", "pg-native"];
/** How long a build waits for others to be asked for, to be built in the same run. */
const BATCH_MS = 100;
const BANNER = [
  `import { createRequire as topLevelCreateRequire } from 'module';`,
  `const require = topLevelCreateRequire(import.meta.url);`,
  `import { fileURLToPath as topLevelFileUrlToPath, URL as topLevelURL } from "url"`,
  `const __filename = topLevelFileUrlToPath(import.meta.url)`,
  `const __dirname = topLevelFileUrlToPath(new topLevelURL(".", import.meta.url))`,
];

interface Planned {
  input: BuildInput;
  file: string;
  /** The module's path in the bundle, without its extension. */
  path: string;
  exportName: string;
  out: string;
  done(result: BuildResult): void;
}

/** Where a function's handler is and where its bundle goes; or the error the SST CLI gives. */
function plan(root: string, work: string, input: BuildInput): Omit<Planned, "done"> | string {
  const out = join(work, "artifacts", `${input.functionID}-src`);
  const dot = input.handler.lastIndexOf(".");
  const file = NODE_EXTENSIONS.map((ext) => resolve(root, input.handler.slice(0, dot) + ext)).find((f) => existsSync(f));
  if (dot < 0 || !file) return `Handler not found: ${input.handler}`;
  if (input.isContainer || !(input.runtime ?? "nodejs").startsWith("nodejs")) {
    return `${input.functionID}: only Node.js zip functions are built offline (runtime ${input.runtime})`;
  }
  const rel = relative(root, file);
  // Lambda's handler may hold one dot only, between the file and the function.
  const path = join(dirname(rel), basename(rel, extname(rel)).replaceAll(".", "-"));
  return { input, file, path, exportName: input.handler.slice(dot + 1), out };
}

/**
 * Node.js functions built as the SST CLI builds each for `sst deploy`, the
 * ones asked for together in one esbuild run (the same options, one entry
 * point each, no code shared between the outputs): the same bundles, built
 * faster than one by one. A function with `splitting` is built alone, its
 * chunks (what it imports dynamically, loaded on first use) in its own output.
 */
async function buildTogether(root: string, work: string, batch: Planned[], built: BuiltFunction[]): Promise<void> {
  const props = batch[0]!.input.properties ?? {};
  for (const p of batch) {
    rmSync(p.out, { recursive: true, force: true });
    mkdirSync(p.out, { recursive: true });
  }
  // With `splitting`, a function's chunks go beside its module, in its own output: it is built alone.
  const outdir = props.splitting ? batch[0]!.out : join(work, "artifacts");
  const result = await build({
    entryPoints: batch.map((p) => ({ in: p.file, out: relative(outdir, join(p.out, p.path)) })),
    outdir, outExtension: { ".js": ".mjs" }, splitting: props.splitting === true,
    absWorkingDir: root, platform: "node", format: "esm", target: "esnext", bundle: true, keepNames: true,
    external: [...FORCE_EXTERNAL, ...(props.install ?? []), ...(props.esbuild?.external ?? [])],
    mainFields: ["module", "main"], metafile: true, write: true, logLevel: "silent",
    minify: props.minify === true, banner: { js: [...BANNER, props.banner ?? ""].join("\n") },
  }).catch((err: { errors?: { text: string; location?: { file: string; line: number } | null }[] }) => ({ errors: err.errors ?? [{ text: String(err) }], metafile: undefined }));
  const errors = result.errors.map((e) => (e.location ? `${e.text} ${e.location.file}:${e.location.line}` : e.text));
  for (const p of batch) {
    const handler = `${p.path}.${p.exportName}`;
    if (errors.length > 0) {
      p.done({ handler: "", out: p.out, errors, sourcemaps: [] });
      continue;
    }
    const { exports, loadsAtStart, bundled } = moduleFacts(result.metafile, root, join(p.out, `${p.path}.mjs`));
    built.push({
      functionID: p.input.functionID, handler, out: p.out, module: `${p.path}.mjs`, exports, loadsAtStart, bundled,
      links: Object.keys(p.input.links ?? {}).sort(),
    });
    p.done({ handler, out: p.out, errors: [], sourcemaps: [] });
  }
}

/** What the module esbuild wrote for `output` exports, and which source files it loads, by its metafile. */
function moduleFacts(metafile: Metafile | undefined, root: string, output: string): Pick<BuiltFunction, "exports" | "loadsAtStart" | "bundled"> {
  // The metafile's paths are relative to the build's working directory, the app's root.
  const outputs = metafile?.outputs ?? {};
  const entry = Object.keys(outputs).find((path) => resolve(root, path) === resolve(output));
  if (!entry) return { exports: [], loadsAtStart: [], bundled: [] };
  // The source files of the entry's module and of the chunks it reaches through the imports `follow` takes.
  const sourcesFrom = (follow: (kind: string) => boolean) => {
    const reached = new Set<string>();
    const reach = (path: string) => {
      if (reached.has(path) || !outputs[path]) return;
      reached.add(path);
      for (const i of outputs[path].imports) if (!i.external && follow(i.kind)) reach(i.path);
    };
    reach(entry);
    return [...new Set([...reached].flatMap((path) => Object.keys(outputs[path]!.inputs)))].sort();
  };
  return {
    exports: outputs[entry]!.exports,
    loadsAtStart: sourcesFrom((kind) => kind === "import-statement"),
    bundled: sourcesFrom(() => true),
  };
}

export interface BuildService {
  url: string;
  built: BuiltFunction[];
  close(): Promise<void>;
}

/** Starts the service for the app at `root`; builds land in `work`/artifacts, as under .sst. */
export async function startBuildService(root: string, work: string): Promise<BuildService> {
  const built: BuiltFunction[] = [];
  // Builds asked for within BATCH_MS of each other, by their options.
  const pending = new Map<string, Planned[]>();
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    const batches = [...pending.values()];
    pending.clear();
    for (const batch of batches) {
      if (batch[0]!.input.properties?.splitting) for (const one of batch) void buildTogether(root, work, [one], built);
      else void buildTogether(root, work, batch, built);
    }
  };
  const answer = async (method: string, args: Record<string, unknown>): Promise<unknown> => {
    if (method === "Runtime.Build") {
      const input = args as unknown as BuildInput;
      const planned = plan(root, work, input);
      if (typeof planned === "string") return { handler: "", out: "", errors: [planned], sourcemaps: [] };
      return new Promise<BuildResult>((done) => {
        const key = JSON.stringify(input.properties ?? {});
        pending.set(key, [...(pending.get(key) ?? []), { ...planned, done }]);
        clearTimeout(timer);
        timer = setTimeout(flush, BATCH_MS);
      });
    }
    if (method === "Provider.Aws.Bootstrap") {
      const region = String(args.region);
      return {
        asset: `sst-asset-synth-${region}`, assetEcrRegistryId: "123456789012",
        assetEcrUrl: `123456789012.dkr.ecr.${region}.amazonaws.com/sst-asset`, state: `sst-state-synth-${region}`,
        appsyncHttp: "", appsyncRealtime: "",
      };
    }
    throw new Error(`rpc: can't find method ${method}`);
  };
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const { method, params } = JSON.parse(body) as { method: string; params: [Record<string, unknown>] };
      answer(method, params[0]).then(
        (result) => res.end(JSON.stringify({ result, error: null })),
        (err: unknown) => res.end(JSON.stringify({ result: null, error: err instanceof Error ? err.message : String(err) })),
      );
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, built, close: () => new Promise((ok) => server.close(() => ok())) };
}
