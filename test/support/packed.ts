import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/**
 * Leasehold as an outside app gets it: `npm pack` of this repository (built
 * first when a source is newer than the last build), installed into an app
 * folder. Shared by the tests that install the tarball (test/package.test.ts,
 * test/first-hour.test.ts).
 */
export const run = promisify(execFile);
export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** This checkout's SST platform (`sst install`'s output), which app folders link to. */
export const PLATFORM = join(ROOT, ".sst", "platform");

/** When dist/ was last built (0: never). */
const builtAt = () => (existsSync(join(ROOT, "dist/.built")) ? statSync(join(ROOT, "dist/.built")).mtimeMs : 0);

/** The newest file the package is built from. */
function newestSource(): number {
  let newest = 0;
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else newest = Math.max(newest, statSync(path).mtimeMs);
    }
  };
  for (const dir of ["shared", "functions", "cli", "dev", "infra", "migrations", "scripts"]) walk(join(ROOT, dir));
  return Math.max(newest, statSync(join(ROOT, "package.json")).mtimeMs);
}

/** What `npm pack --json` says of the tarball, and where it is. */
export interface Packed {
  tarball: string;
  filename: string;
  size: number;
  unpackedSize: number;
  files: { path: string; size: number }[];
}

/** Builds dist/ if stale (as `npm run build`, prepack, does), packs it into `dir`. */
export async function packLeasehold(dir: string): Promise<Packed> {
  if (!existsSync(join(PLATFORM, "config.d.ts"))) await run("bash", ["scripts/check-infra.sh", "--platform-only"], { cwd: ROOT });
  if (builtAt() < newestSource()) await run("npm", ["run", "build"], { cwd: ROOT, maxBuffer: 64 << 20 });
  const { stdout } = await run("npm", ["pack", "--ignore-scripts", "--pack-destination", dir, "--json"], { cwd: ROOT, maxBuffer: 64 << 20 });
  const packed = (JSON.parse(stdout) as Omit<Packed, "tarball">[])[0]!;
  return { ...packed, tarball: join(dir, packed.filename) };
}

/** `npm install` in the app folder, from the npm cache the project's own install filled (the registry only for what is missing). */
export async function installApp(app: string): Promise<void> {
  await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund"], { cwd: app, maxBuffer: 64 << 20 });
}

/** Links this checkout's SST platform into the app, as `sst install` would write it (no network). */
export function linkPlatform(app: string): void {
  mkdirSync(join(app, ".sst"), { recursive: true });
  symlinkSync(PLATFORM, join(app, ".sst", "platform"));
}

/** The sst version this checkout installed: an app pinned to it finds the linked platform current. */
export function sstVersion(): string {
  return (JSON.parse(readFileSync(join(ROOT, "node_modules/sst/package.json"), "utf8")) as { version: string }).version;
}
