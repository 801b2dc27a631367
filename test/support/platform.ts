import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * SST's platform (.sst/platform), which the synthesized stack runs: installed
 * as scripts/check-infra.sh installs it (CI runs that script too) when it is
 * not there; an install that fails fails the test, never skips it.
 */
export function ensurePlatform(): void {
  if (existsSync(join(root, ".sst/platform/node_modules/@pulumi/pulumi/package.json"))) return;
  execFileSync("bash", ["scripts/check-infra.sh", "--platform-only"], { cwd: root, stdio: "inherit" });
}
