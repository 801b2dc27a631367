import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import pg from "pg";
import { defineConfig, type Config } from "../shared/settings/config.ts";
import { resolveSettings } from "../shared/settings/settings.ts";
import type { Pool, Store } from "../shared/db/db.ts";
import type { Registry } from "../shared/jobs/job.ts";
import type { RecurringJob } from "../shared/jobs/recurring.ts";
import { CliError, EXIT, usageError } from "./errors.ts";
import { readDevStackState } from "../dev/state.ts";
import { describeTarget, resolveWakeTarget, invokeScheduler, type WakeTarget } from "./wake.ts";

/**
 * The dev stack's embedded Postgres (`npm run dev`; port and password as in
 * `dev/stack.ts` and `dev/embedded-postgres.ts`): the default when DATABASE_URL is unset.
 * While this checkout's stack runs, its own URL (its port may not be 54329: another
 * checkout's stack may have that one).
 */
export const DEV_DATABASE_URL = readDevStackState()?.databaseUrl
  ?? `postgres://postgres:leasehold@127.0.0.1:${process.env.LEASEHOLD_DEV_PG_PORT || 54329}/postgres`;
/** A CLI run needs few connections; retry-all uses them in parallel. */
const POOL_SIZE = 4;
const CONNECT_TIMEOUT_MS = 10_000;

export interface GlobalValues {
  "database-url"?: string;
  schema?: string;
  jobs?: string;
  config?: string;
  stage?: string;
  json?: boolean;
}

/** What a command runs against and writes to. The database is connected on first use. */
export interface Context {
  /** The app's config (`leasehold.config.ts` in the working directory, or --config). */
  readonly config: Config;
  readonly schema: string;
  readonly json: boolean;
  /** The database URL with its password masked: safe to print. */
  readonly database: string;
  /** True when neither --database-url nor DATABASE_URL was given. */
  readonly usingDevDefault: boolean;
  /** The raw secrets, so error messages can be scrubbed of them. */
  readonly secrets: string[];
  pool(): Pool;
  store(): Store;
  /** The job types of `--jobs` (default: the config's `jobs`). */
  registry(): Promise<Registry>;
  /** The recurring jobs the same module exports as `recurring` (none when it exports none). */
  recurring(): Promise<RecurringJob[]>;
  /** The command's result: `data` as one JSON document with --json, else the human text. */
  output(data: unknown, human: () => string): void;
  /** A progress line on stderr, for long operations. */
  progress(line: string): void;
  /**
   * Which scheduler `wake()` wakes (cli/wake.ts): resolved before anything
   * is written, so a bad --stage changes nothing.
   */
  wakeTarget(): Promise<WakeTarget>;
  /**
   * Wakes the scheduler after an enqueue or retry committed, as the API does.
   * When it cannot (no target, or the Invoke failed), says so on stderr and
   * returns false: never an error, the job is committed.
   */
  wake(): Promise<boolean>;
  close(): Promise<void>;
}

/** The URL with its password replaced by `***`. */
export function maskUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(unparsable url)";
  }
}

function checkedUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw usageError("the database URL is not a URL: expected postgres://user:password@host:port/database");
  }
  if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") {
    throw usageError(`the database URL must start with postgres:// or postgresql://, not ${parsed.protocol}//`);
  }
  return url;
}

/**
 * The strings of a URL that reveal its password: the URL itself and its
 * `:password@` part. (A bare password could be a common word, like the dev
 * stack's, and scrubbing it would garble messages.)
 */
function urlSecrets(url: string): string[] {
  try {
    const { password } = new URL(url);
    return password ? [url, `:${password}@`, `:${decodeURIComponent(password)}@`] : [];
  } catch {
    return [];
  }
}

/** Every database URL and password in the command line and environment: never to be printed, even before a context exists. */
export function secretsOf(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): string[] {
  const secrets: string[] = [];
  for (const candidate of [...argv, ...argv.map((a) => a.replace(/^--database-url=/, "")), env.DATABASE_URL ?? ""]) {
    secrets.push(...urlSecrets(candidate));
  }
  return secrets;
}

export async function loadRegistry(file: string): Promise<Registry> {
  if (!existsSync(file)) throw usageError(`--jobs: no such file ${file}`);
  let exported: { registry?: unknown };
  try {
    exported = await import(pathToFileURL(file).href);
  } catch (err) {
    throw new CliError(EXIT.failed, `could not load job types from ${file}: ${(err as Error).message}`, "jobs_module");
  }
  if (!(exported.registry instanceof Map)) {
    throw usageError(`${file} does not export \`registry\` (make one with createRegistry([...]))`);
  }
  return exported.registry as Registry;
}

/**
 * `appRoot`: the directory of the app's config (the working directory, or
 * that of --config); the config's `jobs` is relative to it.
 */
export function createContext(
  values: GlobalValues, env: NodeJS.ProcessEnv = process.env, config: Config = defineConfig({}), appRoot = process.cwd(),
): Context {
  let settings;
  try {
    settings = resolveSettings({ given: { schema: values.schema, databaseUrl: values["database-url"] }, env, config });
  } catch (err) {
    throw usageError((err as Error).message);
  }
  const given = settings.databaseUrl;
  const url = checkedUrl(given ?? DEV_DATABASE_URL);
  const schema = settings.schema;
  const jobsModule = values.jobs ? resolve(process.cwd(), values.jobs) : resolve(appRoot, config.jobs);
  const json = values.json ?? false;
  let pool: pg.Pool | null = null;
  let registry: Promise<Registry> | null = null;
  let target: Promise<WakeTarget> | null = null;
  const wakeTarget = () => (target ??= resolveWakeTarget({ stage: values.stage, env, appRoot, databaseUrl: url, devState: readDevStackState() }));

  const getPool = (): Pool => {
    if (!pool) {
      // pg directly rather than shared/db/drivers/pg.ts, for the connect timeout:
      // an unreachable host should fail in seconds, not hang.
      pool = new pg.Pool({ connectionString: url, max: POOL_SIZE, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
      pool.on("error", () => {}); // an idle client's lost connection: the next query reports it
    }
    return pool as unknown as Pool;
  };

  return {
    config,
    schema,
    json,
    database: maskUrl(url),
    usingDevDefault: given === undefined,
    secrets: urlSecrets(url),
    pool: getPool,
    store: () => ({ db: getPool(), schema }),
    registry: () => (registry ??= loadRegistry(jobsModule)),
    async recurring() {
      await (registry ??= loadRegistry(jobsModule)); // checks the module, with the CLI's errors
      const file = jobsModule;
      return ((await import(pathToFileURL(file).href)) as { recurring?: RecurringJob[] }).recurring ?? [];
    },
    output(data, human) {
      process.stdout.write(json ? `${JSON.stringify(data, null, 2)}\n` : `${human()}\n`);
    },
    progress(line) {
      process.stderr.write(`${line}\n`);
    },
    wakeTarget,
    async wake() {
      const resolved = await wakeTarget();
      if (resolved.kind === "none") {
        process.stderr.write(`note: the scheduler was not woken: ${resolved.why}; it starts the job at its next wake-up (the daily safety net at the latest). See \`leasehold wake --help\`.\n`);
        return false;
      }
      try {
        await invokeScheduler(resolved, env);
        return true;
      } catch (err) {
        process.stderr.write(`warning: could not wake ${describeTarget(resolved)}: ${String((err as Error)?.message ?? err)}; the job starts at the scheduler's next wake-up\n`);
        return false;
      }
    },
    async close() {
      await pool?.end();
    },
  };
}
