#!/usr/bin/env node
// `npx leasehold`. The app's own modules (leasehold.config.ts, its jobs) are
// TypeScript, so register tsx first (both hooks, as the tsx command does: a
// jobs module in a CommonJS package is loaded through require). Installed,
// the CLI itself is the built JavaScript in dist/; in this repository, the
// TypeScript sources with the repository's tsconfig.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { register as registerCjs } from "tsx/cjs/api";
import { register } from "tsx/esm/api";

const built = new URL("../dist/cli/main.js", import.meta.url);
const fromSource = !existsSync(fileURLToPath(built)) || existsSync(fileURLToPath(new URL("../.git", import.meta.url)));
registerCjs();
register(fromSource ? { tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) } : {});
const { main } = await import(fromSource ? "./main.ts" : built.href);
process.exitCode = await main(process.argv.slice(2));
