// Installs the job queues the benchmark compares Leasehold against
// (bench/package.json: graphile-worker, pg-boss) into bench/node_modules, when
// they are missing or bench/package-lock.json changed since. `npm run bench`
// and `npm run typecheck` run it first; the main install has none of them.
import { execFileSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";

const dir = fileURLToPath(new URL(".", import.meta.url));
const installed = `${dir}node_modules/.package-lock.json`;
const lock = `${dir}package-lock.json`;
if (!existsSync(installed) || statSync(installed).mtimeMs < statSync(lock).mtimeMs) {
  console.error("bench: installing the peers it measures (graphile-worker, pg-boss) into bench/node_modules");
  execFileSync("npm", ["ci", "--no-audit", "--no-fund"], {
    cwd: dir,
    stdio: "inherit",
    shell: process.platform === "win32",
  });
}
