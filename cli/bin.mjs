#!/usr/bin/env node
// `npx leasehold`: the package runs TypeScript as is, so register tsx, then run the CLI.
import { fileURLToPath } from "node:url";
import { register as registerCjs } from "tsx/cjs/api";
import { register } from "tsx/esm/api";

// Both hooks, as the tsx command does: a --jobs module in a CommonJS package
// is loaded through require. The package's own tsconfig, whatever the cwd.
registerCjs();
register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) });
const { main } = await import("./main.ts");
process.exitCode = await main(process.argv.slice(2));
