import { retryDeadJobs, retryJob } from "../../shared/lifecycle/manual.ts";
import { queueStats } from "../../shared/observe/stats.ts";
import { expectPositionals, parseJobId } from "../args.ts";
import { option, type Command } from "../command.ts";
import type { Context } from "../context.ts";
import { usageError } from "../errors.ts";
import { refusal } from "./refusal.ts";

/** Dead jobs retried per statement. */
const BATCH = 1_000;

/** Retries every dead job (of one queue), a batch per statement, newest first. */
async function retryAllDead(ctx: Context, queue: string | undefined) {
  const store = ctx.store();
  const total = (await queueStats(store)).filter((s) => queue === undefined || s.queue === queue).reduce((n, s) => n + s.dead, 0);
  let retried = 0;
  let beforeId: string | undefined;
  do {
    const batch = await retryDeadJobs(store, { queue, beforeId, limit: BATCH });
    retried += batch.retried;
    if (batch.retried > 0) ctx.progress(`retried ${retried}/${Math.max(total, retried)}`);
    beforeId = batch.nextBeforeId ?? undefined;
  } while (beforeId !== undefined);
  if (retried > 0) await ctx.wake();
  const where = queue === undefined ? "" : ` on queue ${queue}`;
  ctx.output({ retried }, () =>
    retried === 0 ? `no dead jobs${where}` : `retried ${retried} dead job${retried === 1 ? "" : "s"}${where}`,
  );
}

export const retryCommand: Command = {
  name: "retry",
  summary: "Put a dead job (or every dead job) back in the queue, with fresh attempts",
  help: `leasehold retry <id>
leasehold retry --all-dead [--queue <q>]

Moves a dead job back to queued with its attempts reset, to run now; its
earlier attempts stay in its history. Then wakes the scheduler, as
\`leasehold enqueue\` does (see \`leasehold wake --help\`). Exit code 3 if there is no such job,
4 if it is not dead.

With --all-dead, retries every dead job (only those of --queue if given),
printing progress to stderr as it goes.

Options:
  --all-dead       retry every dead job instead of one
  --queue <q>      with --all-dead: only this queue`,
  options: { "all-dead": { type: "boolean" }, queue: { type: "string" } },
  async run(ctx, positionals, values) {
    const queue = option(values, "queue");
    await ctx.wakeTarget(); // a bad --stage is refused before anything is written
    if (values["all-dead"]) {
      if (positionals.length > 0) throw usageError("give a job id or --all-dead, not both");
      return retryAllDead(ctx, queue);
    }
    if (queue !== undefined) throw usageError("--queue goes with --all-dead");
    const [raw] = expectPositionals(positionals, ["id"]);
    const id = parseJobId(raw);
    const job = await retryJob(ctx.store(), id);
    if (!job) throw await refusal(ctx, id, "dead", "retried");
    await ctx.wake();
    ctx.output(job, () => `retried job ${id} (${job.name}): queued on ${job.queue} with fresh attempts`);
  },
};
