import { listRecurring } from "../../shared/jobs/recurring.ts";
import { expectPositionals } from "../args.ts";
import type { Command } from "../command.ts";
import { table, when } from "../format.ts";

export const recurringCommand: Command = {
  name: "recurring",
  summary: "Recurring jobs: cron, time zone, the last tick enqueued and the next run",
  help: `leasehold recurring

One line per recurring job the --jobs module (default jobs/index.ts) exports
as \`recurring\`: its name, the job type it enqueues, its cron expression and
time zone, what happens to a tick delivered long after its time (skip or run
late), the last tick enqueued, and when it runs next.`,
  options: {},
  async run(ctx, positionals) {
    expectPositionals(positionals, []);
    const recurring = await listRecurring(ctx.store(), await ctx.recurring());
    ctx.output({ recurring }, () =>
      recurring.length === 0
        ? "no recurring jobs"
        : table(recurring, [
            { header: "NAME", value: (r) => r.name },
            { header: "JOB", value: (r) => r.jobName },
            { header: "CRON", value: (r) => r.cron },
            { header: "TIME ZONE", value: (r) => r.timeZone },
            { header: "MISSED", value: (r) => r.missed },
            { header: "LAST TICK", value: (r) => when(r.lastTickAt) },
            { header: "NEXT RUN", value: (r) => when(r.nextRunAt) },
          ]),
    );
  },
};
