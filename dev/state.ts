import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";

/**
 * Where `npm run dev` and `leasehold dev` keep their embedded Postgres's
 * data: in the directory they run in (the checkout, the app), so each has
 * its own. Light on imports, for tools such as the CLI and linkedLeasehold().
 */
export const DEV_DATA_DIR = process.env.LEASEHOLD_DEV_DATA_DIR || join(process.cwd(), ".dev-data", "pg");
/** Written while a dev stack on the embedded Postgres runs (next to its data), removed when it stops. */
export const DEV_STATE_FILE = join(dirname(DEV_DATA_DIR), "stack.json");

/** The credentials and region the local Lambda runtime accepts (it checks none). */
export const DEV_AWS = { region: "us-east-1", accessKeyId: "local", secretAccessKey: "local" } as const;

/** What a running dev stack publishes in DEV_STATE_FILE, for the CLI and an app's own local server. */
export interface DevStackState {
  pid: number;
  apiUrl: string;
  /** The local Lambda runtime's Invoke API (AWS_ENDPOINT_URL_LAMBDA). */
  lambdaUrl: string;
  databaseUrl: string;
  /** Leasehold's schema in that database (the app's config). */
  schema: string;
  /**
   * The WebSocket-to-TCP relay ("host:port") the Neon driver reaches the
   * database through: what linkedLeasehold() uses with this stack's database.
   */
  wsProxy: string;
  /** The scheduler's name on the local Lambda runtime: what to invoke to wake it. */
  schedulerFunction: string;
  /**
   * The same, as the environment variables linkedLeasehold() and the CLI
   * read: for a process that cannot read this file (another directory, a
   * container). Not the relay, which is no setting of theirs: such a
   * process reaches the database with a driver of its own.
   */
  env: Record<string, string>;
}

/** The environment that points linkedLeasehold() and the CLI at a dev stack. */
export function devStackEnv(s: Omit<DevStackState, "pid" | "env" | "apiUrl">): Record<string, string> {
  return {
    DATABASE_URL: s.databaseUrl,
    LEASEHOLD_SCHEMA: s.schema,
    LEASEHOLD_SCHEDULER_FUNCTION: s.schedulerFunction,
    AWS_ENDPOINT_URL_LAMBDA: s.lambdaUrl,
    AWS_REGION: DEV_AWS.region,
    AWS_ACCESS_KEY_ID: DEV_AWS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: DEV_AWS.secretAccessKey,
  };
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

/** Whether two Postgres URLs name the same database (localhost and 127.0.0.1 alike), ignoring credentials. */
export function sameDatabase(a: string, b: string): boolean {
  const key = (url: string) => {
    try {
      const u = new URL(url);
      const host = ["localhost", "[::1]", "::1"].includes(u.hostname) ? "127.0.0.1" : u.hostname;
      return `${host}:${u.port || "5432"}${u.pathname || "/"}`;
    } catch {
      return url;
    }
  };
  return key(a) === key(b);
}
