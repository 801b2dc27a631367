import { queueStats } from "../../shared/stats.ts";
import { expectPositionals } from "../args.ts";
import type { Command } from "../command.ts";
import { age, table } from "../format.ts";

export const statsCommand: Command = {
  name: "stats",
  summary: "Per queue: ready, delayed, running and dead jobs, and the oldest ready age",
  help: `leasehold stats

One line per queue with jobs pending, running or dead: ready (due now),
delayed (due later, or backing off), running, dead, and how long the oldest
ready job has waited.`,
  options: {},
  async run(ctx, positionals) {
    expectPositionals(positionals, []);
    const queues = await queueStats(ctx.store());
    ctx.output({ queues }, () =>
      queues.length === 0
        ? "no jobs pending, running or dead"
        : table(queues, [
            { header: "QUEUE", value: (q) => q.queue },
            { header: "READY", value: (q) => String(q.ready), align: "right" },
            { header: "DELAYED", value: (q) => String(q.delayed), align: "right" },
            { header: "RUNNING", value: (q) => String(q.running), align: "right" },
            { header: "DEAD", value: (q) => String(q.dead), align: "right" },
            { header: "OLDEST READY", value: (q) => (q.ready ? age(q.oldestReadyAgeSeconds) : "-"), align: "right" },
          ]),
    );
  },
};
