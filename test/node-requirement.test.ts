import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/**
 * The README's Node requirement is true: every package of the main install
 * accepts the lowest Node it names, and of each major after it that Lambda
 * runs (so `npm ci` prints no EBADENGINE warning), and the AWS SDK does not
 * warn on it. The bench's peers are not in the main install.
 */

type Version = [number, number, number];
const parse = (v: string): Version => {
  const m = /^v?(\d+)(?:\.(\d+|x|\*))?(?:\.(\d+|x|\*))?$/.exec(v.trim());
  if (!m) throw new Error(`cannot read the version "${v}"`);
  return [Number(m[1]), Number(m[2] ?? 0) || 0, Number(m[3] ?? 0) || 0];
};
const cmp = (a: Version, b: Version) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

/** Whether `version` satisfies the npm `engines` range; a form it cannot read fails the test rather than pass. */
export function satisfies(version: string, range: string): boolean {
  const v = parse(version);
  return range.split("||").some((set) => {
    const comparators = set.trim().replace(/(>=|<=|>|<|=|\^|~)\s+/g, "$1").split(/\s+/).filter(Boolean);
    return comparators.every((c) => {
      if (c === "*" || c === "x") return true;
      const [, op = "", rest = ""] = /^(>=|<=|>|<|=|\^|~)?(.*)$/.exec(c)!;
      const w = parse(rest);
      const parts = rest.replace(/^v/, "").split(".").filter((p) => p !== "x" && p !== "*").length;
      switch (op) {
        case ">=": return cmp(v, w) >= 0;
        case ">": return cmp(v, w) > 0;
        case "<=": return cmp(v, w) <= 0;
        case "<": return cmp(v, w) < 0;
        case "^": return v[0] === w[0] && cmp(v, w) >= 0 && (w[0] !== 0 || v[1] === w[1]);
        case "~": return v[0] === w[0] && (parts < 2 || v[1] === w[1]) && cmp(v, w) >= 0;
        default: return v[0] === w[0] && (parts < 2 || v[1] === w[1]) && (parts < 3 || v[2] === w[2]);
      }
    });
  });
}

const root = new URL("../", import.meta.url);
const readme = readFileSync(new URL("README.md", root), "utf8");
const pkg = JSON.parse(readFileSync(new URL("package.json", root), "utf8"));
const lock = JSON.parse(readFileSync(new URL("package-lock.json", root), "utf8"));

describe("the Node.js requirement", () => {
  const stated = /Needs Node\.js (\d+\.\d+) or newer/.exec(readme)?.[1];
  // The lowest stated, and the majors Lambda runs from there on.
  const versions = [`${stated}.0`, "24.0.0"];

  it("reads engine ranges as npm does", () => {
    expect(satisfies("22.12.0", "^20.19.0 || >=22.12.0")).toBe(true);
    expect(satisfies("22.11.0", "^20.19.0 || >=22.12.0")).toBe(false);
    expect(satisfies("23.0.0", "^20.0.0 || ^22.0.0 || >=24.0.0")).toBe(false);
    expect(satisfies("20.20.2", ">=22")).toBe(false);
    expect(satisfies("22.12.0", ">= 10")).toBe(true);
    expect(satisfies("0.18.0", "^0.17.0")).toBe(false);
    expect(() => satisfies("22.12.0", ">=22.12.0-rc.1")).toThrow(/cannot read/);
  });

  it("is stated in the README and is the package's engines", () => {
    expect(stated).toBe("22.12");
    for (const v of versions) expect(satisfies(v, pkg.engines.node), `${v} in ${pkg.engines.node}`).toBe(true);
    expect(satisfies("22.11.0", pkg.engines.node)).toBe(false);
  });

  it("is accepted by every package of the main install, which has none of the bench's peers", () => {
    type Entry = { version?: string; optional?: boolean; cpu?: string[]; engines?: { node?: string } | string[]; dependencies?: object; optionalDependencies?: object };
    const entries = lock.packages as Record<string, Entry>;
    // WebAssembly builds (cpu wasm32), and what only they depend on, install on no machine Node runs on.
    const wasmOnly = new Set(Object.keys(entries).filter((p) => entries[p]!.cpu?.every((c) => c === "wasm32")));
    for (let grew = true; grew; ) {
      grew = false;
      for (const [path, entry] of Object.entries(entries)) {
        if (!entry.optional || wasmOnly.has(path)) continue;
        const name = path.replace(/^.*node_modules\//, "");
        const dependents = Object.keys(entries).filter((p) => name in { ...entries[p]!.dependencies, ...entries[p]!.optionalDependencies });
        if (dependents.length > 0 && dependents.every((p) => wasmOnly.has(p))) grew = !!wasmOnly.add(path);
      }
    }
    expect([...wasmOnly].sort()).toContain("node_modules/@rolldown/binding-wasm32-wasi");
    const refusing: string[] = [];
    for (const [path, entry] of Object.entries(entries)) {
      const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      if (!path || !range || wasmOnly.has(path)) continue;
      for (const v of versions) if (!satisfies(v, range)) refusing.push(`${path}@${entry.version} wants node ${range}, not ${v}`);
    }
    expect(refusing).toEqual([]);
    expect(Object.keys(lock.packages).filter((p) => /node_modules\/(graphile-worker|pg-boss)$/.test(p))).toEqual([]);
  });

  it("is one the AWS SDK does not warn about (it warns below its own minimum)", async () => {
    const { emitWarningIfUnsupportedVersion } = (await import("@aws-sdk/core/client")) as { emitWarningIfUnsupportedVersion(v: string): void };
    const warnings: string[] = [];
    const listen = (w: Error) => warnings.push(w.message);
    process.on("warning", listen);
    const saved = process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED;
    delete process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED;
    try {
      for (const v of versions) emitWarningIfUnsupportedVersion(`v${v}`);
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick: a turn, not a time
      expect(warnings).toEqual([]);
      emitWarningIfUnsupportedVersion("v20.20.2"); // the check can fail: an older Node is warned about
      await new Promise((r) => setImmediate(r));
      expect(warnings.join("\n")).toMatch(/NodeVersionSupportWarning/);
    } finally {
      process.off("warning", listen);
      if (saved !== undefined) process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = saved;
    }
  });
});
