import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * The shape of the core, read from its source: no import cycle in shared/
 * (type imports count: a cycle of types still ties the modules together).
 */

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

function tsFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** Every relative import and re-export of each file under `dir`, static or dynamic, as paths from the repo root. */
export function importGraph(dir: string): Map<string, string[]> {
  const files = tsFiles(dir);
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const src = readFileSync(join(root, file), "utf8");
    const specifiers = [
      ...src.matchAll(/\b(?:import|export)\b[^;]*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']/gs),
      ...src.matchAll(/\bimport\s*\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g),
      ...src.matchAll(/^\s*import\s*["'](\.{1,2}\/[^"']+)["']/gm),
    ].map((m) => m[1]!);
    const deps = specifiers.map((s) => normalize(join(dirname(file), s)).replace(/\.js$/, ".ts")).filter((d) => known.has(d));
    graph.set(file, [...new Set(deps)]);
  }
  return graph;
}

/** The strongly connected components with more than one module (or a module importing itself): each is a cycle. */
export function importCycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

describe("the import graph of shared/", () => {
  it("finds a cycle when there is one (the check itself)", () => {
    const graph = new Map([
      ["a.ts", ["b.ts"]],
      ["b.ts", ["c.ts"]],
      ["c.ts", ["a.ts"]],
      ["d.ts", ["a.ts"]],
    ]);
    expect(importCycles(graph)).toEqual([["a.ts", "b.ts", "c.ts"]]);
    expect(importCycles(new Map([["a.ts", ["b.ts"]], ["b.ts", []]]))).toEqual([]);
  });

  it("reads type imports, re-exports and dynamic imports as edges", () => {
    const graph = importGraph("shared");
    expect(graph.get(join("shared", "validate.ts"))).toContain(join("shared", "job-types.ts"));
    expect(graph.get(join("shared", "index.ts"))).toContain(join("shared", "job.ts"));
    expect(graph.size).toBeGreaterThan(30);
  });

  it("has no import cycle", () => {
    const cycles = importCycles(importGraph("shared")).map((c) => c.map((f) => relative("shared", f)).join(" <-> "));
    expect(cycles).toEqual([]);
  });
});
