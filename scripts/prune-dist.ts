import { readdirSync, rmSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { readManifest, unusedFiles } from "./package-files.ts";

/**
 * The last step of `npm run build`: deletes from dist/ every file that
 * nothing in the package uses (scripts/package-files.ts says which): the
 * declarations of internal modules no public type reaches, and modules that
 * only declare types. The tarball then holds only what an app loads or its
 * compiler reads (test/package.test.ts checks the packed list).
 */
const root = fileURLToPath(new URL("..", import.meta.url));
const walk = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]));
const files = [...walk(join(root, "dist")), join(root, "cli/bin.mjs")].map((f) => relative(root, f).split(sep).join("/"));
const unused = unusedFiles(files, readManifest(root), root).filter((f) => f.startsWith("dist/"));
for (const f of unused) rmSync(join(root, f));
console.log(`dist/: ${files.length - 1 - unused.length} files kept, ${unused.length} that nothing uses removed`);
