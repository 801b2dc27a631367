import { dirname, resolve } from "node:path";
import { parseArgs } from "node:util";
import { cancelCommand } from "./commands/cancel.ts";
import { enqueueCommand } from "./commands/enqueue.ts";
import { jobCommand, jobsCommand } from "./commands/jobs.ts";
import { migrateCommand } from "./commands/migrate.ts";
import { pruneCommand } from "./commands/prune.ts";
import { retryCommand } from "./commands/retry.ts";
import { statsCommand } from "./commands/stats.ts";
import { recurringCommand } from "./commands/recurring.ts";
import { devCommand } from "./commands/dev.ts";
import { wakeCommand } from "./commands/wake.ts";
import { checkCommand } from "./commands/check.ts";
import type { Command, Values } from "./command.ts";
import { createContext, DEV_DATABASE_URL, maskUrl, secretsOf, type Context, type GlobalValues } from "./context.ts";
import { loadAppConfig } from "../dev/app-config.ts";
import { EXIT, usageError } from "./errors.ts";
import { reportFailure } from "./report.ts";

/** `leasehold`: the operator's command line for a Leasehold queue. */

const COMMANDS: readonly Command[] = [
  devCommand, migrateCommand, enqueueCommand, jobsCommand, jobCommand, retryCommand, cancelCommand, statsCommand, recurringCommand, pruneCommand, wakeCommand, checkCommand,
];

const GLOBAL_OPTIONS = {
  "database-url": { type: "string" },
  schema: { type: "string" },
  jobs: { type: "string" },
  config: { type: "string" },
  stage: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

const GLOBAL_HELP = `Options for every command:
  --database-url <url>   Postgres to use (default: $DATABASE_URL, else the
                         embedded Postgres of the dev stack, \`npm run dev\`:
                         ${maskUrl(DEV_DATABASE_URL)})
  --schema <name>        Leasehold's schema (default: $LEASEHOLD_SCHEMA, else the
                         config's schema, else leasehold)
  --config <file>        the app's config (default: ./leasehold.config.ts if there
                         is one, else every default)
  --jobs <module>        a module exporting \`registry\` (default: the config's
                         \`jobs\`, jobs/index.ts)
  --stage <stage>        after an enqueue or retry, wake the scheduler deployed
                         to this SST stage (default: the dev stack's, when the
                         database is its own; see \`leasehold wake --help\`)
  --json                 print one JSON document on stdout instead of text
  -h, --help             help for the command`;

const MAIN_HELP = `leasehold: operate a Leasehold job queue on Postgres.

Usage: leasehold <command> [arguments] [options]

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(9)} ${c.summary}`).join("\n")}

${GLOBAL_HELP}

Exit codes: 0 ok, 1 operational error (database unreachable, query failed),
2 usage or validation error, 3 job not found, 4 conflict (the job is in the
wrong state for the action). Progress of long operations goes to stderr.
Run \`leasehold <command> --help\` for a command's options.`;

/** Runs one command line and returns the exit code; never throws. */
export async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    const topic = name === "help" ? COMMANDS.find((c) => c.name === rest[0]) : undefined;
    const text = topic ? `${topic.help}\n\n${GLOBAL_HELP}` : MAIN_HELP;
    (name === undefined ? process.stderr : process.stdout).write(`${text}\n`);
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  const json = rest.includes("--json");
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    const err = usageError(`unknown command ${JSON.stringify(name)}; commands: ${COMMANDS.map((c) => c.name).join(", ")}`);
    return reportFailure(err, { json, secrets: secretsOf(rest) });
  }
  let ctx: Context | undefined;
  try {
    const { values, positionals } = parseArgs({
      args: [...rest],
      options: { ...GLOBAL_OPTIONS, ...command.options },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) {
      process.stdout.write(`${command.help}\n\n${GLOBAL_HELP}\n`);
      return EXIT.ok;
    }
    const globals = values as GlobalValues;
    let config;
    try {
      config = await loadAppConfig(process.cwd(), globals.config);
    } catch (err) {
      throw usageError(`config: ${(err as Error).message.split("\n")[0]}`);
    }
    const appRoot = globals.config ? dirname(resolve(globals.config)) : process.cwd();
    ctx = createContext(globals, process.env, config, appRoot);
    await command.run(ctx, positionals, values as Values);
    return EXIT.ok;
  } catch (err) {
    return reportFailure(err, {
      json,
      command: command.name,
      secrets: [...(ctx?.secrets ?? []), ...secretsOf(rest)],
      database: ctx?.database,
      usingDevDefault: ctx?.usingDevDefault,
    });
  } finally {
    await ctx?.close().catch(() => {});
  }
}
