import { readyBanner, runDevStack } from "../../dev/run.ts";
import { devOutput } from "../../dev/output.ts";
import { option, type Command } from "../command.ts";
import { expectPositionals } from "../args.ts";

export const devCommand: Command = {
  name: "dev",
  summary: "run the whole system locally with the app's own jobs",
  help: `leasehold dev [--verbose]

Runs the app in the working directory locally until Ctrl-C: an embedded
Postgres (or DATABASE_URL), migrations, the local Lambda runtime with the
runners, scheduler and rescuer built from the app's leasehold.config.ts and
jobs module (the same function entries \`sst deploy\` bundles), their
schedules, and the API with the dashboard. PORT picks the API's port.
Jobs already queued or running in its database are started (the scheduler
is woken at start). While it runs, .dev-data/stack.json tells the CLI and
linkedLeasehold() in your own server where its database, WebSocket relay
and scheduler are: \`leasehold enqueue\` and \`retry\` wake it with nothing set.

It prints what each handler writes (console.log, console.error, ...) behind
its job, \`[<type> #<id> run <n>]\`, with the stack of an error it throws
(source-mapped to the app's own files), and one line per job that ends dead,
counting its runs.

Options:
  --verbose   also print every line the functions themselves log`,
  options: { verbose: { type: "boolean" } },
  async run(ctx, positionals, values) {
    expectPositionals(positionals, []);
    await runDevStack({
      name: "leasehold dev",
      root: process.cwd(),
      config: ctx.config,
      jobsModule: option(values, "jobs"),
      databaseUrl: process.env.DATABASE_URL || undefined,
      port: process.env.PORT ? Number(process.env.PORT) : undefined,
      apiToken: process.env.LEASEHOLD_API_TOKEN || undefined,
      onLog: devOutput(values.verbose === true),
      onReady: (stack) => void console.log(readyBanner(stack)),
    });
    await new Promise(() => {}); // until Ctrl-C: runDevStack stops the stack and exits
  },
};
