import * as z from "zod";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { defineRecurring, type RecurringJob } from "../shared/jobs/recurring.ts";

/**
 * The app's job types. The runner serves these; the API and in-route enqueue
 * validate payloads against their schemas. Replace the examples with yours.
 */

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });

/** A quick job: the common case. */
export const sendWelcomeEmail = defineJob({
  name: "email.welcome",
  schema: z.object({ to: z.email(), name: z.string().min(1).max(200) }),
  handler: async ({ to }) => {
    await sleep(5);
    return { delivered: to };
  },
});

/** A slow job that stops when its lease ends: it listens to its AbortSignal. */
export const generateReport = defineJob({
  name: "report.generate",
  schema: z.object({ reportId: z.string().min(1), seconds: z.number().min(0).max(60).default(3) }),
  leaseMs: 20_000,
  handler: async ({ seconds }, ctx) => {
    for (let s = 0; s < seconds * 10; s++) await sleep(100, ctx.signal);
  },
});

/** Every morning at 6:00, Paris time: the daily report, enqueued once per day. */
export const dailyReport = defineRecurring(generateReport, {
  name: "report.daily",
  cron: "0 6 * * *",
  timeZone: "Europe/Paris",
  payload: { reportId: "daily", seconds: 1 },
});

/** Fails its first attempts, then succeeds: retries with backoff at work. */
export const flakyWebhook = defineJob({
  name: "webhook.flaky",
  schema: z.object({ url: z.url(), failTimes: z.number().int().min(0).max(10).default(2) }),
  maxAttempts: 5,
  backoffMs: 500,
  handler: async ({ url, failTimes }, ctx) => {
    if (ctx.attempt <= failTimes) throw new Error(`POST ${url}: 503 (attempt ${ctx.attempt})`);
  },
});

/** Kills the process that runs it, every time: ends `dead` after 3 starts. */
export const crashRunner = defineJob({
  name: "runner.crash",
  schema: z.object({ how: z.enum(["exit", "oom"]).default("exit") }),
  leaseMs: 5_000,
  backoffMs: 200,
  handler: async ({ how }) => {
    if (how === "exit") process.kill(process.pid, "SIGKILL");
    const hog: number[][] = [];
    for (;;) hog.push(new Array(1_000_000).fill(hog.length));
  },
});

/** A multi-step chain: each step enqueues the next. */
export const chainStep: ReturnType<typeof defineJob<z.ZodObject<{ run: z.ZodString; step: z.ZodNumber; of: z.ZodNumber }>>> =
  defineJob({
    name: "chain.step",
    schema: z.object({ run: z.string(), step: z.number().int().min(1), of: z.number().int().min(1).max(1000) }),
    handler: async ({ run, step, of }, ctx) => {
      if (step < of) await ctx.enqueue(chainStep, { run, step: step + 1, of });
    },
  });

/** CPU-heavy work, on its own queue served by a one-slot runner. */
export const crunch = defineJob({
  name: "cpu.crunch",
  schema: z.object({ ms: z.number().int().min(1).max(10_000).default(1_000) }),
  queue: "cpu",
  handler: ({ ms }) => {
    const until = Date.now() + ms;
    let x = 0;
    while (Date.now() < until) x += Math.sqrt(x + 1);
    return x;
  },
});

/**
 * Recurring jobs, each next to its job type: a cron expression and a time
 * zone (see shared/jobs/recurring.ts). infra/ deploys one EventBridge schedule each.
 */
export const recurring: RecurringJob[] = [dailyReport];

export const registry = createRegistry([sendWelcomeEmail, generateReport, flakyWebhook, crashRunner, chainStep, crunch]);
