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

const HOW = "install it (Debian or Ubuntu: apt-get install chromium) or set LEASEHOLD_CHROMIUM to a Chromium or Chrome executable";

const executable = (path: string) => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/**
 * The browser for the dashboard's browser test: `LEASEHOLD_CHROMIUM` when
 * set (and then only that), else the first of the usual places. When there is
 * none, `error` says so and how to get one.
 */
export function findChromium(env: NodeJS.ProcessEnv = process.env, candidates = CHROMIUM_CANDIDATES): { path: string } | { error: string } {
  const chosen = env.LEASEHOLD_CHROMIUM;
  if (chosen) {
    return executable(chosen)
      ? { path: chosen }
      : { error: `The dashboard's browser test needs Chromium: LEASEHOLD_CHROMIUM=${chosen} is not an executable file; ${HOW}.` };
  }
  const found = candidates.find(executable);
  return found
    ? { path: found }
    : { error: `The dashboard's browser test needs Chromium, and none was found (looked in ${candidates.join(", ")}): ${HOW}.` };
}
