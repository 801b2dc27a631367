import { cancelJob } from "../../shared/lifecycle/manual.ts";
import { expectPositionals, parseJobId } from "../args.ts";
import type { Command } from "../command.ts";
import { refusal } from "./refusal.ts";

export const cancelCommand: Command = {
  name: "cancel",
  summary: "Cancel a queued job",
  help: `leasehold cancel <id>

Cancels a job that is still queued (due or delayed). A running job cannot be
cancelled. Exit code 3 if there is no such job, 4 if it is not queued.`,
  options: {},
  async run(ctx, positionals) {
    const [raw] = expectPositionals(positionals, ["id"]);
    const id = parseJobId(raw);
    const job = await cancelJob(ctx.store(), id);
    if (!job) throw await refusal(ctx, id, "queued", "cancelled");
    ctx.output(job, () => `cancelled job ${id} (${job.name} on ${job.queue})`);
  },
};
