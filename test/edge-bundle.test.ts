import { builtinModules } from "node:module";
import { fileURLToPath } from "node:url";
import { build, type Message, type Plugin } from "esbuild";
import { describe, expect, it } from "vitest";
import { Miniflare } from "miniflare";
import { edgeBuildOptions } from "../dev/edge-bundle.ts";
import { EDGE_COMPATIBILITY } from "../shared/settings/environment.ts";

/**
 * The enqueue path (core enqueue, Neon driver, Hono, the job registry, and
 * the whole API app) and the edge consumer (runner, scheduler, rescuer) must
 * run on edge runtimes, which have no Node built-ins.
 * Bundled for a neutral, browser-like platform, any such import fails.
 */

const root = fileURLToPath(new URL("..", import.meta.url));
const builtins = new Set(builtinModules);

const refuseNodeBuiltins: Plugin = {
  name: "refuse-node-builtins",
  setup(b) {
    b.onResolve({ filter: /.*/ }, ({ path, importer }) => {
      const bare = path.replace(/^node:/, "");
      if (path.startsWith("node:") || builtins.has(bare) || builtins.has(bare.split("/")[0]!)) {
        return { errors: [{ text: `Node built-in "${path}" imported by ${importer.replace(root, "")}` }] };
      }
      return undefined;
    });
  },
};

async function bundleForEdge(entry: string): Promise<{ errors: Message[]; bytes: number }> {
  try {
    const result = await build({ ...edgeBuildOptions(entry), plugins: [refuseNodeBuiltins] });
    return { errors: result.errors, bytes: result.outputFiles[0]!.contents.length };
  } catch (err) {
    return { errors: (err as { errors: Message[] }).errors, bytes: 0 };
  }
}

describe("edge runtimes", () => {
  it("the Worker's runtime gives the Neon driver its own Buffer and setImmediate, which the driver takes over its JavaScript shims", async () => {
    // The driver's test, as it is written in @neondatabase/serverless.
    const probe = `export default { fetch: () => Response.json({
      buffer: typeof globalThis.Buffer == "function" && typeof globalThis.Buffer.allocUnsafe == "function",
      setImmediate: typeof globalThis.setImmediate == "function" }) }`;
    const runtime = async (flags: string[]) => {
      const mf = new Miniflare({ modules: true, script: probe, compatibilityDate: EDGE_COMPATIBILITY.date, compatibilityFlags: flags });
      try {
        return await (await mf.dispatchFetch("http://edge/")).json();
      } finally {
        await mf.dispose();
      }
    };
    expect(await runtime([...EDGE_COMPATIBILITY.flags])).toEqual({ buffer: true, setImmediate: true });
    // Without the flag it has neither: what the probe reads is the runtime's, not the test's.
    expect(await runtime([])).toEqual({ buffer: false, setImmediate: false });
  });

  it.each(["examples/edge-signup.ts", "functions/api/app.ts", "functions/edge/worker.ts"])("bundles %s with no Node built-in", async (entry) => {
    const { errors, bytes } = await bundleForEdge(entry);
    expect(errors.map((e) => e.text)).toEqual([]);
    expect(bytes).toBeGreaterThan(10_000);
  });

  it("fails a file that reaches the pg driver, so the check can fail", async () => {
    const { errors } = await bundleForEdge("shared/db/drivers/pg.ts");
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.map((e) => e.text).join("\n")).toMatch(/Node built-in "(node:)?(net|events|fs|dns|util|crypto)"/);
  });
});
