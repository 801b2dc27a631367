import { expectPositionals } from "../args.ts";
import type { Command } from "../command.ts";
import { CliError, EXIT } from "../errors.ts";
import { describeTarget, invokeScheduler } from "../wake.ts";

export const wakeCommand: Command = {
  name: "wake",
  summary: "Wake the scheduler, so jobs made ready by other means start now",
  help: `leasehold wake [--stage <stage>]

Wakes the scheduler (one asynchronous Invoke), which starts runners for the
ready jobs and watches those due later. \`leasehold enqueue\` and
\`leasehold retry\` do this themselves after they commit; run it after jobs
were written or changed by anything else: your own SQL, a psql session, a
script. Without a wake-up such jobs start at the scheduler's next one (its
daily safety net at the latest).

Which scheduler, the first that applies:
  --stage <stage>                 the one deployed to that SST stage (named from
                                  sst.config.ts's app name; your AWS credentials)
  LEASEHOLD_SCHEDULER_FUNCTION    that function (the AWS SDK's usual endpoint,
                                  region and credentials)
  the dev stack in this directory (.dev-data/stack.json, written by
                                  \`leasehold dev\`), when the database is its own
Exit code 1 when there is none or the Invoke fails, saying which.

Examples:
  leasehold wake
  leasehold wake --stage production`,
  options: {},
  async run(ctx, positionals) {
    expectPositionals(positionals, []);
    const target = await ctx.wakeTarget();
    if (target.kind === "none") throw new CliError(EXIT.failed, `no scheduler to wake: ${target.why}`, "no_scheduler");
    try {
      await invokeScheduler(target, process.env);
    } catch (err) {
      throw new CliError(EXIT.failed, `could not wake ${describeTarget(target)}: ${(err as Error)?.message ?? String(err)}`, "wake_failed");
    }
    ctx.output({ woken: target.functionName, target: target.kind }, () => `woke ${describeTarget(target)}`);
  },
};
