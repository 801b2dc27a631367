import { pruneJobs } from "../../shared/observe/stats.ts";
import { expectPositionals, parseDurationMs } from "../args.ts";
import { option, type Command } from "../command.ts";

export const pruneCommand: Command = {
  name: "prune",
  summary: "Delete finished jobs (and their attempts) older than a retention",
  help: `leasehold prune [--older-than <duration>]

Deletes succeeded, dead and cancelled jobs that finished longer ago than
--older-than, with their attempt history, 5,000 at a time, printing progress
to stderr. Queued and running jobs are never touched.

Options:
  --older-than <duration>   e.g. 12h, 7d, 30d (default: the config's
                            retentionDays, 7d by default). A unit is required.`,
  options: { "older-than": { type: "string" } },
  async run(ctx, positionals, values) {
    expectPositionals(positionals, []);
    const given = option(values, "older-than");
    const olderThanMs = given === undefined ? ctx.config.retentionDays * 86_400_000 : parseDurationMs("older-than", given);
    const deleted = await pruneJobs(ctx.store(), olderThanMs, { onProgress: (n) => ctx.progress(`pruned ${n} so far`) });
    const label = given ?? `${ctx.config.retentionDays}d`;
    ctx.output({ deleted, olderThanMs }, () => `pruned ${deleted} finished job${deleted === 1 ? "" : "s"} older than ${label}`);
  },
};
