/**
 * Where a worker child's CPU went, from the V8 CPU profiles it wrote
 * (BENCH_CHILD_CPU_PROF=<dir> npm run bench -- --only budget ...):
 *
 *   npx tsx bench/cpu-profile.ts <dir or .cpuprofile> [top]
 *
 * Prints self time by package (or file of this repository), and the top
 * functions by self time, each as a share of the profile's sampled time.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number; children?: number[] }
interface Profile { nodes: Node[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number }

/** The package a script URL belongs to, or its path under the repository, or what V8 calls it. */
export function owner(url: string): string {
  if (!url) return "(native / gc / idle)";
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith("node:")) return "node core";
  const local = /\/(bench\/\.work\/[^/]+\/)?([^/]+\.js)$/.exec(url);
  return local ? `bundle: ${local[2]}` : url;
}

export function summarise(profile: Profile, top = 25) {
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) selfUs.set(profile.samples[i]!, (selfUs.get(profile.samples[i]!) ?? 0) + (profile.timeDeltas[i] ?? 0));
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const byOwner = new Map<string, number>();
  const byFn = new Map<string, number>();
  for (const n of profile.nodes) {
    const us = selfUs.get(n.id) ?? 0;
    if (!us) continue;
    const f = n.callFrame;
    const who = f.functionName === "(idle)" ? "(idle)" : f.functionName === "(garbage collector)" ? "(gc)" : owner(f.url);
    byOwner.set(who, (byOwner.get(who) ?? 0) + us);
    const key = `${f.functionName || "(anonymous)"}  ${who}${f.url ? `:${f.lineNumber + 1}` : ""}`;
    byFn.set(key, (byFn.get(key) ?? 0) + us);
  }
  const busy = total - (byOwner.get("(idle)") ?? 0);
  const rows = (m: Map<string, number>) => [...m].filter(([k]) => k !== "(idle)" && !k.startsWith("(idle)")).sort((a, b) => b[1] - a[1]).slice(0, top)
    .map(([k, us]) => ({ share: Math.round((us / busy) * 1000) / 10, ms: Math.round(us / 100) / 10, what: k }));
  return { busy_ms: Math.round(busy / 1000), by_owner: rows(byOwner), by_function: rows(byFn) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [path, top] = [process.argv[2]!, Number(process.argv[3] ?? 25)];
  const files = statSync(path).isDirectory() ? readdirSync(path).filter((f) => f.endsWith(".cpuprofile")).map((f) => join(path, f)) : [path];
  for (const f of files) {
    const s = summarise(JSON.parse(readFileSync(f, "utf8")) as Profile, top);
    console.log(`\n${f}: ${s.busy_ms} ms busy`);
    console.log("  by package:");
    for (const r of s.by_owner) console.log(`    ${String(r.share).padStart(5)} %  ${String(r.ms).padStart(8)} ms  ${r.what}`);
    console.log("  by function (self):");
    for (const r of s.by_function) console.log(`    ${String(r.share).padStart(5)} %  ${String(r.ms).padStart(8)} ms  ${r.what}`);
  }
}
