import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/**
 * The TypeScript the documentation shows, as an app would paste it: every
 * ```ts block of README.md and docs/*.md. A block whose first line is a
 * comment naming a file (`// src/jobs.ts`) is that file of the app; any
 * other block is a module of its own in `src/`, so `./jobs` from it is the
 * app's `src/jobs.ts`. A block after `<!-- not checked: <reason> -->` is
 * left out (a fragment on purpose; keep those few).
 */
export interface Snippet {
  /** Where it is shown: `docs/api.md:231`. */
  at: string;
  /** The app-relative file it is written to. */
  path: string;
  text: string;
}

const NOT_CHECKED = /<!--\s*not checked:[^>]*-->\s*$/;
const NAMED = /^\/\/ ([\w./-]+\.ts)\n/;

export function docSnippets(root: string): { checked: Snippet[]; notChecked: string[] } {
  const docs = ["README.md", ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)];
  const checked: Snippet[] = [];
  const notChecked: string[] = [];
  for (const doc of docs) {
    const source = readFileSync(join(root, doc), "utf8");
    for (const m of source.matchAll(/^```ts\n([\s\S]*?)^```$/gm)) {
      const line = source.slice(0, m.index).split("\n").length;
      const at = `${doc}:${line}`;
      if (NOT_CHECKED.test(source.slice(0, m.index).trimEnd())) {
        notChecked.push(at);
        continue;
      }
      const text = m[1]!;
      const named = NAMED.exec(text);
      const path = named ? named[1]! : `src/${basename(doc, ".md").toLowerCase()}-${line}.ts`;
      checked.push({ at, path, text });
    }
  }
  return { checked, notChecked };
}

/** Writes the snippets into `dir` as an app's files, with a tsconfig that checks them all (and SST's globals for sst.config.ts). */
export function writeSnippetApp(dir: string, snippets: readonly Snippet[], sstConfigTypes: string): string {
  const paths = new Map<string, string>();
  for (const s of snippets) {
    const earlier = paths.get(s.path);
    if (earlier) throw new Error(`${s.at} and ${earlier} both name ${s.path}`);
    paths.set(s.path, s.at);
    mkdirSync(dirname(join(dir, s.path)), { recursive: true });
    writeFileSync(join(dir, s.path), s.text);
  }
  // sst.config.ts's `/// <reference path="./.sst/platform/config.d.ts" />`: the app's platform.
  symlinkSync(dirname(dirname(sstConfigTypes)), join(dir, ".sst"));
  const tsconfig = {
    compilerOptions: {
      target: "ES2022", module: "ESNext", moduleResolution: "Bundler", lib: ["ES2023", "DOM"], strict: true,
      skipLibCheck: true, esModuleInterop: true, noEmit: true, types: ["node"],
    },
    files: [sstConfigTypes, ...paths.keys()],
  };
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(tsconfig, null, 2));
  return join(dir, "tsconfig.json");
}
