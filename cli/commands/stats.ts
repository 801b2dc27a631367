import { groupStats, rateLimitStats } from "../../shared/observe/group-stats.ts";
import { claimable } from "../../shared/settings/serving.ts";
import { queueStats } from "../../shared/observe/stats.ts";
import { expectPositionals } from "../args.ts";
import { option, type Command } from "../command.ts";
import { age, table } from "../format.ts";

export const statsCommand: Command = {
  name: "stats",
  summary: "Per queue: ready, unserved, delayed, running and dead jobs, and the oldest ready age",
  help: `leasehold stats [--groups [--queue <q>]]

One line per queue with jobs pending, running or dead: ready (due now),
unserved (ready jobs no runner can claim: their queue is not served by a
runner in the app's config, their type is not in --jobs, or their lease is
longer than the runner serving the queue allows), delayed (due later, or
backing off), running, dead, and how long the oldest ready job has waited.

Options:
  --groups       one line per group instead, as the fair claim shares them
                 (busiest first, up to 500): ready, running, and the
                 concurrency limit its jobs carry; "-" is ungrouped. Then,
                 if any due job has a rate limit, one line per rate key:
                 jobs waiting, starts in the window over the limit, the
                 period, and when a full window opens
  --queue <q>    with --groups: only this queue`,
  options: { groups: { type: "boolean" }, queue: { type: "string" } },
  async run(ctx, positionals, values) {
    expectPositionals(positionals, []);
    if (values.groups) {
      const query = { queue: option(values, "queue") };
      const [groups, rateLimits] = await Promise.all([groupStats(ctx.store(), query), rateLimitStats(ctx.store(), query)]);
      ctx.output({ groups, rateLimits }, () => {
        const shares = groups.length === 0
          ? "no jobs queued or running"
          : table(groups, [
              { header: "QUEUE", value: (g) => g.queue },
              { header: "GROUP", value: (g) => g.group ?? "-" },
              { header: "READY", value: (g) => String(g.ready), align: "right" },
              { header: "RUNNING", value: (g) => String(g.running), align: "right" },
              { header: "LIMIT", value: (g) => (g.limit === null ? "-" : String(g.limit)), align: "right" },
            ]);
        if (rateLimits.length === 0) return shares;
        return `${shares}\n\n${table(rateLimits, [
          { header: "RATE KEY", value: (r) => r.key },
          { header: "WAITING", value: (r) => String(r.waiting), align: "right" },
          { header: "STARTED", value: (r) => `${r.startedInWindow}/${r.limit}`, align: "right" },
          { header: "PER", value: (r) => `${r.periodMs} ms`, align: "right" },
          { header: "OPENS", value: (r) => (r.opensAt ? r.opensAt.toISOString() : "now") },
        ])}`;
      });
      return;
    }
    const queues = await queueStats(ctx.store(), claimable(ctx.config, (await ctx.registry()).keys()));
    ctx.output({ queues }, () =>
      queues.length === 0
        ? "no jobs pending, running or dead"
        : table(queues, [
            { header: "QUEUE", value: (q) => q.queue },
            { header: "READY", value: (q) => String(q.ready), align: "right" },
            { header: "UNSERVED", value: (q) => String(q.unserved), align: "right" },
            { header: "DELAYED", value: (q) => String(q.delayed), align: "right" },
            { header: "RUNNING", value: (q) => String(q.running), align: "right" },
            { header: "DEAD", value: (q) => String(q.dead), align: "right" },
            { header: "OLDEST READY", value: (q) => (q.ready ? age(q.oldestReadyAgeSeconds) : "-"), align: "right" },
          ]),
    );
  },
};
