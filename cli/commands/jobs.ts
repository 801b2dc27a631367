import { getJob, listJobs, type AttemptRecord, type JobRecord } from "../../shared/observe/admin.ts";
import type { JobStatus } from "../../shared/jobs/job.ts";
import { expectPositionals, parseInteger, parseJobId } from "../args.ts";
import { option, type Command } from "../command.ts";
import { usageError } from "../errors.ts";
import { fields, orDash, table, when, type Column } from "../format.ts";
import { notFound } from "./refusal.ts";

const STATUSES: readonly JobStatus[] = ["queued", "running", "succeeded", "dead", "cancelled"];

const JOB_COLUMNS: Column<JobRecord>[] = [
  { header: "ID", value: (j) => j.id, align: "right" },
  { header: "NAME", value: (j) => j.name, maxWidth: 32 },
  { header: "QUEUE", value: (j) => j.queue, maxWidth: 20 },
  { header: "STATUS", value: (j) => j.status },
  { header: "ATTEMPTS", value: (j) => `${j.attempts}/${j.maxAttempts}`, align: "right" },
  { header: "RUN AT", value: (j) => when(j.runAt) },
  { header: "LAST ERROR", value: (j) => j.lastError ?? "", maxWidth: 50 },
];

export const jobsCommand: Command = {
  name: "jobs",
  summary: "List jobs, newest first, a page at a time",
  help: `leasehold jobs [options]

Lists jobs newest first. When there are more, the last line gives the
--cursor for the next page (with --json: "nextCursor").

Options:
  --status <s>     queued, running, succeeded, dead or cancelled
  --queue <q>      only this queue
  --name <n>       only this job type
  --limit <n>      jobs per page, 1 to 500 (default 50)
  --cursor <c>     the next page, as given by the previous one

Examples:
  leasehold jobs --status dead
  leasehold jobs --queue cpu --limit 10 --json`,
  options: {
    status: { type: "string" },
    queue: { type: "string" },
    name: { type: "string" },
    limit: { type: "string" },
    cursor: { type: "string" },
  },
  async run(ctx, positionals, values) {
    expectPositionals(positionals, []);
    const status = option(values, "status");
    if (status !== undefined && !STATUSES.includes(status as JobStatus)) {
      throw usageError(`--status must be one of ${STATUSES.join(", ")}; got ${JSON.stringify(status)}`);
    }
    const limit = option(values, "limit");
    const cursor = option(values, "cursor");
    const page = await listJobs(ctx.store(), {
      status: status as JobStatus | undefined,
      queue: option(values, "queue"),
      name: option(values, "name"),
      limit: limit === undefined ? undefined : parseInteger("limit", limit, 1, 500),
      cursor: cursor === undefined ? undefined : parseJobId(cursor),
    });
    ctx.output(page, () => {
      if (page.jobs.length === 0) return cursor ? "no more jobs" : "no jobs";
      const more = page.nextCursor ? `\nmore: add --cursor ${page.nextCursor}` : "";
      return table(page.jobs, JOB_COLUMNS) + more;
    });
  },
};

export const jobCommand: Command = {
  name: "job",
  summary: "Show one job with its attempt history",
  help: `leasehold job <id>

Shows a job's fields, its payload, its result once it has succeeded (the
handler's return value), one line per attempt it has made (with the steps
it replayed or ran), and its recorded steps (ctx.step):
how it ended, on which runner, and its error. Exit code 3 if there is no
such job.`,
  options: {},
  async run(ctx, positionals) {
    const [raw] = expectPositionals(positionals, ["id"]);
    const id = parseJobId(raw);
    const job = await getJob(ctx.store(), id);
    if (!job) throw notFound(id);
    ctx.output(job, () => {
      const details = fields([
        ["id", job.id],
        ["name", job.name],
        ["queue", job.queue],
        ["status", job.status],
        ["priority", String(job.priority)],
        ["attempts", `${job.attempts}/${job.maxAttempts}`],
        ["generation", String(job.generation)],
        ["run at", when(job.runAt)],
        ["created at", when(job.createdAt)],
        ["started at", when(job.startedAt)],
        ["finished at", when(job.finishedAt)],
        ["lease until", when(job.leaseExpiresAt)],
        ["runner", orDash(job.runnerId)],
        ["group", orDash(job.group)],
        ["dedupe key", orDash(job.dedupeKey)],
        ["last error", orDash(job.lastError?.split("\n")[0])],
        ["payload", JSON.stringify(job.payload)],
        ["result", job.status === "succeeded" ? JSON.stringify(job.result) : "-"],
      ]);
      const attempts = job.attemptHistory.length
        ? table(job.attemptHistory, [
            { header: "RUN", value: (a) => String(a.run), align: "right" },
            { header: "GEN", value: (a) => String(a.generation), align: "right" },
            { header: "OUTCOME", value: (a) => a.outcome },
            { header: "RUNNER", value: (a) => orDash(a.runnerId), maxWidth: 40 },
            { header: "CLAIMED AT", value: (a) => when(a.claimedAt) },
            { header: "ENDED AT", value: (a) => when(a.endedAt) },
            { header: "STEPS", value: (a) => stepLog(a.steps), maxWidth: 60 },
            { header: "ERROR", value: (a) => (a.error ?? "").split("\n")[0]!, maxWidth: 60 },
          ])
        : "no attempts yet";
      const steps = job.steps.length
        ? table(job.steps, [
            { header: "STEP", value: (s) => String(s.position), align: "right" },
            { header: "GEN", value: (s) => String(s.generation), align: "right" },
            { header: "NAME", value: (s) => s.name, maxWidth: 40 },
            { header: "RAN IN", value: (s) => String(s.attempt), align: "right" },
            { header: "TOOK", value: (s) => `${Math.round(s.durationMs)}ms`, align: "right" },
            { header: "RESULT", value: (s) => JSON.stringify(s.result) ?? "-", maxWidth: 60 },
          ])
        : null;
      return [details, attempts, ...(steps ? [steps] : []), ...wholeErrors(job.attemptHistory)].join("\n\n");
    });
  },
};

/** Every run's error in full (the table shows each one's first line, cut): its stack, its cause. */
function wholeErrors(history: readonly AttemptRecord[]): string[] {
  return history
    .filter((a) => a.error)
    .map((a) => `run ${a.run} ${a.outcome}:\n${a.error!.split("\n").map((line) => `  ${line}`).join("\n")}`);
}

/** An attempt's steps in one cell: each name, `(replayed)` or its time. */
function stepLog(steps: { name: string; replayed: boolean; ms: number }[] | null): string {
  if (!steps) return "";
  return steps.map((s) => `${s.name} ${s.replayed ? "(replayed)" : `${Math.round(s.ms)}ms`}`).join(", ");
}
