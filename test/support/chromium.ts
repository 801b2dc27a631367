import { accessSync, constants } from "node:fs";

/** Where Chromium (or Chrome) usually is, Debian's first. */
export const CHROMIUM_CANDIDATES = [
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
  "/usr/bin/google-chrome-stable",
  "/usr/bin/google-chrome",
  "/Applications/Chromium.app/Contents/MacOS/Chromium",
  "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
];

const HOW =
  "install it (Debian or Ubuntu: apt-get install chromium), set LEASEHOLD_CHROMIUM to a Chromium or Chrome executable, " +
  "or run npm ci (the @sparticuz/chromium dev dependency, Linux x64 and arm64)";

const executable = (path: string) => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

export type Found = { path: string; from: "LEASEHOLD_CHROMIUM" | "system" | "npm" } | { error: string };

/** The Chromium that ships inside the `@sparticuz/chromium` npm package, unpacked (once) into the temp folder; or why not. */
export type NpmChromium = () => Promise<{ path: string } | { error: string }>;

/** `@sparticuz/chromium` (a dev dependency): its browser is in the package, brotli-packed; nothing is downloaded. */
export const npmChromium: NpmChromium = async () => {
  try {
    const { default: chromium } = await import("@sparticuz/chromium");
    return { path: await chromium.executablePath() };
  } catch (err) {
    return { error: `@sparticuz/chromium gave none (${(err as Error).message})` };
  }
};

/**
 * The browser for the dashboard's browser test: `LEASEHOLD_CHROMIUM` when
 * set (and then only that), else the first of the usual places (a system
 * Chromium), else the one in the `@sparticuz/chromium` dev dependency, so that
 * `npm ci` then `npm test` need nothing else. When there is none, `error`
 * says so and how to get one.
 */
export async function findChromium(
  env: NodeJS.ProcessEnv = process.env,
  candidates = CHROMIUM_CANDIDATES,
  fromNpm: NpmChromium = npmChromium,
): Promise<Found> {
  const chosen = env.LEASEHOLD_CHROMIUM;
  if (chosen) {
    return executable(chosen)
      ? { path: chosen, from: "LEASEHOLD_CHROMIUM" }
      : { error: `The dashboard's browser test needs Chromium: LEASEHOLD_CHROMIUM=${chosen} is not an executable file; ${HOW}.` };
  }
  const found = candidates.find(executable);
  if (found) return { path: found, from: "system" };
  const packaged = await fromNpm();
  return "path" in packaged
    ? { path: packaged.path, from: "npm" }
    : { error: `The dashboard's browser test needs Chromium, and none was found (looked in ${candidates.join(", ")}; ${packaged.error}): ${HOW}.` };
}
