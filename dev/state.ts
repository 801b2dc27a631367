import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";

/**
 * Where `npm run dev` and `leasehold dev` keep their embedded Postgres's
 * data: in the directory they run in (the checkout, the app), so each has
 * its own. Light on imports, for tools such as the CLI.
 */
export const DEV_DATA_DIR = process.env.LEASEHOLD_DEV_DATA_DIR || join(process.cwd(), ".dev-data", "pg");
/** Written while a dev stack on the embedded Postgres runs (next to its data), removed when it stops. */
export const DEV_STATE_FILE = join(dirname(DEV_DATA_DIR), "stack.json");

export interface DevStackState {
  pid: number;
  apiUrl: string;
  lambdaUrl: string;
  databaseUrl: string;
}

/** The running dev stack's URLs, or null when none runs (no file, or its process is gone). */
export function readDevStackState(file = DEV_STATE_FILE): DevStackState | null {
  try {
    const state = JSON.parse(readFileSync(file, "utf8")) as DevStackState;
    process.kill(state.pid, 0);
    return state;
  } catch {
    return null;
  }
}
