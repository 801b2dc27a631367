import { relative } from "node:path";
import { PostgresStartError } from "./embedded-postgres.ts";
import { devStackEnv } from "./state.ts";
import { DevStackError, startDevStack, type DevStack, type DevStackOptions } from "./stack.ts";

export interface RunDevStackOptions extends DevStackOptions {
  /** Called once the stack is up (print its URLs, start traffic); its result is stopped first at shutdown. */
  onReady?(stack: DevStack): { stop(): void } | void;
  /** How the command is named in messages. */
  name?: string;
  /** Longest a shutdown may take before the process gives up on it (exit 1). */
  stopTimeoutMs?: number;
}

/**
 * Runs the dev stack as a command: until Ctrl-C (SIGINT) or SIGTERM, which
 * stop it (the API, the functions, then Postgres) and exit 0 after one line.
 * A problem the user can fix at start (a port in use, Postgres data held by
 * another stack) is one line on stderr and exit 1, with nothing left
 * running. Signals are handled from the first moment: one that arrives while
 * the stack starts stops it as soon as it is up.
 */
export async function runDevStack(options: RunDevStackOptions = {}): Promise<void> {
  const { onReady, name = "leasehold dev", stopTimeoutMs = 20_000, ...stackOptions } = options;
  let stack: DevStack | null = null;
  let extra: { stop(): void } | void;
  let stopping = false;

  const stop = async () => {
    if (stopping || !stack) {
      stopping = true; // while starting: stopped as soon as it is up
      return;
    }
    stopping = true;
    process.stdout.write("stopping... ");
    const timer = setTimeout(() => {
      process.stdout.write(`did not stop within ${stopTimeoutMs / 1000} s\n`);
      process.exit(1);
    }, stopTimeoutMs);
    timer.unref();
    try {
      extra?.stop();
      await stack.close();
      process.stdout.write("stopped\n");
      process.exit(0);
    } catch (err) {
      process.stdout.write(`failed: ${(err as Error).message}\n`);
      process.exit(1);
    }
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);

  try {
    stack = await startDevStack(stackOptions);
  } catch (err) {
    if (stopping) {
      // Interrupted while starting (the signal may have reached a setup step such as initdb): what started was closed.
      process.stdout.write("stopped\n");
      process.exit(0);
    }
    if (err instanceof DevStackError || err instanceof PostgresStartError) {
      console.error(`${name}: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
  if (stopping) {
    stopping = false;
    return stop();
  }
  extra = onReady?.(stack);
}

/** What `npm run dev` and `leasehold dev` print once the stack is up. */
export function readyBanner(stack: DevStack, note = ""): string {
  return `
Leasehold is running.
  dashboard   ${stack.dashboardUrl}
  API         ${stack.apiUrl}   (Authorization: Bearer ${stack.apiToken})
  Lambda      ${stack.lambdaUrl}   (local Invoke API: runner, scheduler, rescuer)
  Postgres    ${stack.databaseUrl.replace(/:[^:@/]+@/, ":***@")}   (schema ${stack.schema})
  WS relay    ${stack.wsProxy}   (the Neon driver's way to it, in the local functions and linkedLeasehold())
  job types   ${[...stack.registry.keys()].join(", ")}
${published(stack)}${note}
Ctrl-C stops everything.`;
}

/** Where an app's own server and the CLI find the stack, with nothing exported by hand. */
function published(stack: DevStack): string {
  if (!stack.stateFile) {
    // Not on the embedded Postgres: no state file, so the variables (all but DATABASE_URL, which was given).
    const { DATABASE_URL: _, ...env } = devStackEnv({ ...stack, schedulerFunction: "scheduler" });
    return `  no state    (DATABASE_URL given) for the CLI and linkedLeasehold(): export ${Object.entries(env).map(([k, v]) => `${k}=${v}`).join(" ")}\n`;
  }
  const file = relative(process.cwd(), stack.stateFile) || stack.stateFile;
  return `  state       ${file}   (the CLI and linkedLeasehold() read it: they reach this database, relay and scheduler; its "env" lists the database, schema and scheduler as variables)\n`;
}
