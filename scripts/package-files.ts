import { readFileSync } from "node:fs";
import { join, posix } from "node:path";

/**
 * Which files of the packed package something uses, read from the files
 * themselves: from the package's entry points (its `exports`, JavaScript and
 * types, and its `bin`), every relative module a file imports (static or
 * dynamic, `import type` included in declarations) and every file it names
 * with `new URL("./…", import.meta.url)` (a folder there: all of it), in
 * turn. The manifest and the documentation are shipped to be read.
 */
export interface PackageManifest {
  exports: Record<string, string | { types?: string; default?: string }>;
  bin?: Record<string, string>;
}

const READ_AS_DOCUMENTS = (path: string) => path === "package.json" || /^(README|LICENSE)[^/]*$/i.test(path) || /^docs\/[^/]+\.md$/.test(path);

/** Relative specifiers in a module's text: imports and exports, `import()`, and `new URL(…, import.meta.url)`. */
function specifiers(text: string, ext: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["'](\.{1,2}\/[^"']+)["']/g)) found.push(m[1]!);
  // A template's one varying part is the module's own extension (`./child${ext}`).
  for (const m of text.matchAll(/new URL\(\s*[`"'](\.{1,2}\/[^`"']*)[`"']\s*,\s*import\.meta\.url/g)) found.push(m[1]!);
  for (const m of text.matchAll(/new URL\(\s*`(\.{1,2}\/[^`]*)\$\{[^`]*\}`\s*,\s*import\.meta\.url/g)) found.push(m[1]! + ext);
  return found;
}

/** The shipped files that nothing uses, given the shipped list (package-relative, `/`-separated) and where they are. */
export function unusedFiles(files: readonly string[], manifest: PackageManifest, root: string): string[] {
  const shipped = new Set(files);
  const used = new Set(files.filter(READ_AS_DOCUMENTS));
  const queue: string[] = [];
  const use = (path: string) => {
    if (!shipped.has(path) || used.has(path)) return;
    used.add(path);
    queue.push(path);
  };
  for (const entry of Object.values(manifest.exports)) {
    for (const target of typeof entry === "string" ? [entry] : [entry.types, entry.default]) if (target) use(posix.normalize(target));
  }
  for (const target of Object.values(manifest.bin ?? {})) use(posix.normalize(target));

  while (queue.length > 0) {
    const file = queue.shift()!;
    if (!/\.(m?js|d\.ts)$/.test(file)) continue;
    const declaration = file.endsWith(".d.ts");
    const dir = posix.dirname(file);
    for (const spec of specifiers(readFileSync(join(root, file), "utf8"), posix.extname(file))) {
      const target = posix.normalize(posix.join(dir, spec));
      if (target.endsWith("/")) files.filter((f) => f.startsWith(target)).forEach(use);
      // A declaration's `./x.ts` or `./x.js` is `./x.d.ts`; a module's `./x.ts` was rewritten to `./x.js` when built.
      else if (declaration) use(target.replace(/\.(ts|js)$/, ".d.ts"));
      else use(target);
    }
  }
  return files.filter((f) => !used.has(f));
}

/** The package's own manifest. */
export function readManifest(root: string): PackageManifest {
  return JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as PackageManifest;
}

