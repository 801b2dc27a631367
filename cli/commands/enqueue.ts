import { getJob } from "../../shared/observe/admin.ts";
import { enqueue } from "../../shared/jobs/enqueue.ts";
import { ValidationError } from "../../shared/errors.ts";
import type { EnqueueOptions } from "../../shared/jobs/job.ts";
import { MAX_RATE_LIMIT } from "../../shared/jobs/rate-limit.ts";
import { servingRules } from "../../shared/settings/serving.ts";
import { expectPositionals, parseDurationMs, parseInteger } from "../args.ts";
import { option, type Command, type Values } from "../command.ts";
import { CliError, EXIT, usageError } from "../errors.ts";
import { when } from "../format.ts";

/** Each enqueue option as the flag that sets it, so an issue names what the user typed. */
const FLAGS: Record<string, string> = {
  queue: "--queue", delayMs: "--delay", priority: "--priority", maxAttempts: "--max-attempts", dedupeKey: "--dedupe-key", group: "--group",
  debounce: "--debounce", "debounce.key": "--debounce", "debounce.periodMs": "--debounce-period", "debounce.maxWaitMs": "--debounce-max-wait",
  throttle: "--throttle", "throttle.key": "--throttle", "throttle.periodMs": "--throttle-period",
  rateLimit: "--rate-key", "rateLimit.key": "--rate-key", "rateLimit.limit": "--rate-limit", "rateLimit.periodMs": "--rate-period",
};

/** The flag an issue's path names: the whole path (`debounce.periodMs`), else its first field. */
const flagOf = (path: (string | number)[]) => FLAGS[path.join(".")] ?? FLAGS[String(path[0])];

/** A key flag and its duration flags go together: each without the other is refused, naming the one missing. */
function keyed(values: Values, flag: string, durations: { name: string; required: boolean }[]) {
  const key = option(values, flag);
  const given = durations.filter((d) => option(values, d.name) !== undefined);
  if (key === undefined) {
    if (given.length > 0) throw usageError(`--${given[0]!.name} needs --${flag} <key>`);
    return undefined;
  }
  const missing = durations.find((d) => d.required && option(values, d.name) === undefined);
  if (missing) throw usageError(`--${flag} needs --${missing.name} <duration>`);
  return key;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function enqueueOptions(values: Values): EnqueueOptions {
  const options: EnqueueOptions = {};
  const queue = option(values, "queue");
  const delay = option(values, "delay");
  const priority = option(values, "priority");
  const maxAttempts = option(values, "max-attempts");
  const dedupeKey = option(values, "dedupe-key");
  const group = option(values, "group");
  if (queue !== undefined) options.queue = queue;
  if (delay !== undefined) options.delayMs = parseDurationMs("delay", delay);
  if (priority !== undefined) options.priority = parseInteger("priority", priority, -32768, 32767);
  if (maxAttempts !== undefined) options.maxAttempts = parseInteger("max-attempts", maxAttempts, 1, 1000);
  if (dedupeKey !== undefined) options.dedupeKey = dedupeKey;
  if (group !== undefined) options.group = group;
  const debounceKey = keyed(values, "debounce", [{ name: "debounce-period", required: true }, { name: "debounce-max-wait", required: false }]);
  if (debounceKey !== undefined) {
    const maxWait = option(values, "debounce-max-wait");
    options.debounce = {
      key: debounceKey,
      periodMs: parseDurationMs("debounce-period", option(values, "debounce-period")!),
      ...(maxWait !== undefined && { maxWaitMs: parseDurationMs("debounce-max-wait", maxWait) }),
    };
  }
  const throttleKey = keyed(values, "throttle", [{ name: "throttle-period", required: true }]);
  if (throttleKey !== undefined) options.throttle = { key: throttleKey, periodMs: parseDurationMs("throttle-period", option(values, "throttle-period")!) };
  const rateKey = keyed(values, "rate-key", [{ name: "rate-limit", required: false }, { name: "rate-period", required: false }]);
  if (rateKey !== undefined) {
    const limit = option(values, "rate-limit");
    const period = option(values, "rate-period");
    options.rateLimit = {
      key: rateKey,
      ...(limit !== undefined && { limit: parseInteger("rate-limit", limit, 1, MAX_RATE_LIMIT) }),
      ...(period !== undefined && { periodMs: parseDurationMs("rate-period", period) }),
    };
  }
  return options;
}

export const enqueueCommand: Command = {
  name: "enqueue",
  summary: "Enqueue one job, its payload checked by the job type's schema",
  help: `leasehold enqueue <name> <json> [options]

Enqueues a job of type <name> (from --jobs, default jobs/index.ts) with the
JSON payload <json>; pass - to read the payload from stdin. The payload is
checked by the job type's zod schema first, and the job against the runners
in the app's config (its queue must be served, its lease must fit): if it is
refused, each bad field is named, nothing is written, and the exit code is 2.
Once the job is committed, the CLI wakes the scheduler so it starts now
(see \`leasehold wake --help\` for which one; --stage for a deployment).

Options:
  --queue <q>            queue to put it on (default: the job type's)
  --delay <duration>     run after this long: 1500ms, 30s, 5m, 2h, 7d
  --priority <n>         higher runs first (-32768 to 32767)
  --max-attempts <n>     attempts before it is dead (1 to 1000)
  --dedupe-key <k>       while a job of this type with key k is pending, return it instead
  --group <g>            tenant or other group the job belongs to
  --debounce <k>         keep one unclaimed job of this type with key k: a later
                         enqueue of k updates it (its payload) and moves its start
  --debounce-period <duration>    start this long after the last enqueue of k
  --debounce-max-wait <duration>  but no later than this after the first (default: 10 periods)
  --throttle <k>         keep the first job of this type with key k, and return it
                         for the rest of its window, writing nothing
  --throttle-period <duration>    the window, from the standing job's enqueue
  --rate-key <k>         count this job's start under rate limit key k instead of
                         its type's key (only for a type that declares a rateLimit)
  --rate-limit <n>       with --rate-key: its limit instead of the type's
  --rate-period <duration>        with --rate-key: its period instead of the type's

Examples:
  leasehold enqueue email.welcome '{"to":"ada@example.com","name":"Ada"}'
  leasehold enqueue report.generate '{"reportId":"r1"}' --delay 5m --priority 10
  leasehold enqueue search.reindex '{"doc":"d42"}' --debounce d42 --debounce-period 5s --debounce-max-wait 1m
  cat payload.json | leasehold enqueue report.generate - --json`,
  options: {
    queue: { type: "string" },
    delay: { type: "string" },
    priority: { type: "string" },
    "max-attempts": { type: "string" },
    "dedupe-key": { type: "string" },
    group: { type: "string" },
    debounce: { type: "string" },
    "debounce-period": { type: "string" },
    "debounce-max-wait": { type: "string" },
    throttle: { type: "string" },
    "throttle-period": { type: "string" },
    "rate-key": { type: "string" },
    "rate-limit": { type: "string" },
    "rate-period": { type: "string" },
  },
  async run(ctx, positionals, values) {
    const [name, text] = expectPositionals(positionals, ["name", "json"]) as [string, string];
    const options = enqueueOptions(values);
    let payload: unknown;
    try {
      payload = JSON.parse(text === "-" ? await readStdin() : text);
    } catch (err) {
      throw usageError(`the payload is not valid JSON: ${(err as Error).message}`);
    }
    await ctx.wakeTarget(); // a bad --stage is refused before anything is written
    const registry = await ctx.registry();
    const type = registry.get(name);
    if (!type) {
      throw new CliError(EXIT.usage, `unknown job type ${JSON.stringify(name)}; known types: ${[...registry.keys()].join(", ")}`, "unknown_job_type", { name });
    }
    let result;
    try {
      result = await enqueue(ctx.store(), type, payload, options, { serving: servingRules(ctx.config) });
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      const issues = err.issues.map((i) => ({ ...i, path: flagOf(i.path) ? [flagOf(i.path)!] : i.path }));
      throw new ValidationError(`${name} refused: nothing was enqueued`, issues);
    }
    if (!result.existing) await ctx.wake();
    const job = await getJob(ctx.store(), result.id);
    if (!job) throw new Error(`job ${result.id} was enqueued but is gone already`);
    const { attemptHistory: _, ...record } = job;
    const { existing, debounced, throttled } = result;
    ctx.output({ ...record, existing, ...(debounced && { debounced }), ...(throttled && { throttled }) }, () =>
      debounced
        ? `debounced into job ${result.id} (${name}): its payload is this one, it runs at ${when(record.runAt)}`
        : throttled
          ? `job ${result.id} (${name}) stands in this throttle window; nothing enqueued`
          : existing
            ? `job ${result.id} (${name}) is already pending with dedupe key ${JSON.stringify(options.dedupeKey)}; nothing enqueued`
            : `enqueued job ${result.id}: ${name} on queue ${record.queue}, runs at ${when(record.runAt)}`,
    );
  },
};
