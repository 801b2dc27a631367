import * as z from "zod";
import { SCHEMA_NAME } from "../db/db.ts";
import { schedulerTimeoutNeededMs } from "../scheduler/wake-plan.ts";

/**
 * Every knob of a Leasehold deployment in one validated place. An app writes
 * its config once (`leasehold.config.ts`: `export default defineConfig({...})`);
 * the SST component sizes the Lambda functions, crons and alarms from it, the
 * functions are built with it, and `leasehold dev` runs the very same values,
 * so local and deployed cannot drift.
 */

export const DEFAULT_SCHEMA = "leasehold";
export const DEFAULT_QUEUE = "default";
export const DEFAULT_LEASE_MS = 30_000;
/**
 * The shortest lease a job may ask for, and the shortest `maxLeaseMs` a
 * runner may declare. Under connection cuts and silent connections a
 * settle took up to 0.6 s (p99 0.3 s) to land: a 1 s lease leaves a success
 * at least 0.6 s and a timeout its 0.4 s margin (docs/internals.md, "The
 * minimum lease").
 */
export const MIN_LEASE_MS = 1_000;
/** Why a lease below `MIN_LEASE_MS` is refused. */
export const MIN_LEASE_MESSAGE = `must be at least ${MIN_LEASE_MS}ms (MIN_LEASE_MS): a shorter lease cannot hold a settle under faults`;
export const DEFAULT_MAX_ATTEMPTS = 3;
export const DEFAULT_BACKOFF_MS = 1_000;
export const DEFAULT_PRIORITY = 0;
export const MAX_BACKOFF_MS = 60 * 60_000;
export const DEFAULT_SLOTS = 20;
export const DEFAULT_CLAIM_BATCH = 20;
/** Time a runner keeps back after its last lease for settling and closing. */
export const RUNNER_MARGIN_MS = 5_000;
/** A runner with nothing to claim for this long exits (at most; see `linger`). */
export const DEFAULT_RUNNER_IDLE_MS = 2_000;
/**
 * A live runner with free slots looks for new jobs this often: what a job
 * enqueued while a runner is already live waits, at most (the scheduler's
 * wake-up does not reach a runner that is already running).
 */
export const DEFAULT_RUNNER_POLL_MS = 50;
/**
 * How a runner behaves where its config says nothing: the one source of
 * these defaults, for the config's runners (Lambda and edge) and for
 * `runWorker` called without them (shared/runner/options.ts).
 */
export const RUNNER_DEFAULTS = {
  idleMs: DEFAULT_RUNNER_IDLE_MS,
  pollMs: DEFAULT_RUNNER_POLL_MS,
  linger: "adaptive",
  fair: true,
} as const;
const LINGERS = ["adaptive", "fixed"] as const;
/** The scheduler's and rescuer's cron: a safety net, not the way work is found. */
export const SAFETY_NET_SCHEDULE = "rate(1 day)";

const runnerSchema = z.object({
  /** Queues this runner serves, in claim order. */
  queues: z.array(z.string().min(1)).min(1),
  slots: z.number().int().min(1).max(1_000).default(DEFAULT_SLOTS),
  memoryMb: z.number().int().min(128).max(10_240).default(1024),
  timeoutSeconds: z.number().int().min(10).max(900).default(300),
  /** Longest lease a job on these queues may ask for. */
  maxLeaseMs: z.number().int().min(MIN_LEASE_MS, MIN_LEASE_MESSAGE).default(DEFAULT_LEASE_MS),
  /** The longest a runner with nothing to do stays before it exits. */
  idleMs: z.number().int().positive().default(RUNNER_DEFAULTS.idleMs),
  /**
   * `adaptive`: stay only as long as the arrivals seen make another likely
   * (an isolated job's runner leaves after one poll; a stream keeps it, up to
   * `idleMs`); `fixed`: always `idleMs`. See shared/runner/linger.ts.
   */
  linger: z.enum(LINGERS).default(RUNNER_DEFAULTS.linger),
  /** How often a runner with free slots looks for new jobs. */
  pollMs: z.number().int().min(10).default(RUNNER_DEFAULTS.pollMs),
  /** Hard cap on concurrent invocations of this runner. */
  maxConcurrency: z.number().int().min(1).max(1_000).default(10),
  /** Share each claim between the groups with ready jobs; false: these queues opt out (priority order only). */
  fair: z.boolean().default(RUNNER_DEFAULTS.fair),
  /**
   * A light variant of this runner, its own function `<name>-light` with less
   * memory and fewer slots, started instead of the full one when no runner
   * of either is live and the ready jobs fit its slots (an isolated job, a
   * trickle); bursts get the full one. Its jobs must fit its memory (and its
   * CPU share, which Lambda scales with memory). Unset: no variant.
   */
  light: z
    .object({
      memoryMb: z.number().int().min(128).max(10_240).default(256),
      slots: z.number().int().min(1).max(1_000).default(4),
    })
    .optional(),
});

/** A light variant's function name; its reserved concurrency (one starts at a time, one may be on its way out). */
export const lightRunner = (name: string) => `${name}-light`;
export const LIGHT_MAX_CONCURRENCY = 2;

/**
 * Workers limits that bind an edge runner: an invocation holds at most 6
 * connections at once (its Neon WebSockets and its handlers' fetches share
 * them). A runner's wall-time budget is capped at 15 minutes: the scheduler's
 * Cron Trigger invocation holds each runner's response until it ends.
 */
export const WORKERS_MAX_CONNECTIONS = 6;
export const EDGE_MAX_WALL_MS = 15 * 60_000;

const edgeRunnerSchema = z.object({
  queues: z.array(z.string().min(1)).min(1),
  slots: z.number().int().min(1).max(100).default(10),
  /** Jobs claimed ahead of the free slots; default adaptive (see `WorkerOptions.prefetch`). */
  prefetch: z.number().int().min(0).max(1_000).optional(),
  /** As for Lambda runners: share each claim between the groups with ready jobs; false: priority order only. */
  fair: z.boolean().default(RUNNER_DEFAULTS.fair),
  /**
   * Wall time one runner invocation may take: Workers have no remaining-time
   * clock, so the runner counts down from this budget.
   */
  wallMs: z.number().int().min(5_000).max(EDGE_MAX_WALL_MS).default(60_000),
  /** CPU time limit of the runner Worker (`limits.cpu_ms`); 30 s by default on Workers Paid. */
  cpuMs: z.number().int().min(10).max(300_000).default(30_000),
  maxLeaseMs: z.number().int().min(MIN_LEASE_MS, MIN_LEASE_MESSAGE).default(DEFAULT_LEASE_MS),
  idleMs: z.number().int().positive().default(RUNNER_DEFAULTS.idleMs),
  linger: z.enum(LINGERS).default(RUNNER_DEFAULTS.linger),
  pollMs: z.number().int().min(10).default(RUNNER_DEFAULTS.pollMs),
  maxConcurrency: z.number().int().min(1).max(1_000).default(10),
});

/** The consumer on Cloudflare Workers, beside (or instead of) the Lambda runners. */
const edgeSchema = z.object({
  runners: z.record(z.string().regex(/^[a-z][a-z0-9-]*$/), edgeRunnerSchema).prefault({
    "edge-runner": { queues: [DEFAULT_QUEUE] },
  }),
  /** Neon connections per runner invocation; the rest of the 6 are left to its handlers. */
  connectionsPerRunner: z.number().int().min(1).max(WORKERS_MAX_CONNECTIONS - 1).default(3),
  scheduler: z
    .object({
      /** Cron expression of the scheduler's Cron Trigger (Workers cron syntax). */
      schedule: z.string().default("* * * * *"),
      /** How long one scheduler invocation keeps fanning out. */
      wallMs: z.number().int().min(1_000).default(50_000),
      pollMs: z.number().int().min(100).default(1_000),
    })
    .prefault({}),
  rescuer: z.object({ schedule: z.string().default("* * * * *") }).prefault({}),
});

export const configSchema = z
  .object({
    /** The app's jobs module (exports `registry`, optionally `recurring`), relative to the app's root. */
    jobs: z.string().min(1).default("jobs/index.ts"),
    schema: z.string().regex(SCHEMA_NAME).default(DEFAULT_SCHEMA),
    /** Runner functions by name; each serves its own queues with its own size. */
    runners: z.record(z.string().regex(/^[a-z][a-z0-9-]*$/), runnerSchema).prefault({
      runner: { queues: [DEFAULT_QUEUE], light: { memoryMb: 256, slots: 4 } },
    }),
    /** Database connections all runners together may hold. */
    connectionBudget: z.number().int().min(1).default(40),
    /** Each runner invocation holds this many connections. */
    connectionsPerRunner: z.number().int().min(1).default(3),
    scheduler: z
      .object({
        /**
         * The safety net only: enqueues, runners and armed one-time schedules
         * wake the scheduler. Each tick wakes the database for a moment (Neon
         * then stays up 5 minutes): once a day costs ~0.6 CU-hour a month.
         */
        schedule: z.string().default(SAFETY_NET_SCHEDULE),
        // Covers a sleep to the next due time after an armed schedule fired late.
        timeoutSeconds: z.number().int().min(10).max(900).default(90),
        memoryMb: z.number().int().min(128).default(256),
        /** How often it looks at demand within one invocation. */
        pollMs: z.number().int().min(100).default(1_000),
        /**
         * Longest wait before asking Lambda again for an Invoke that failed
         * (throttled, reset, no answer), and how often a missing function is
         * asked again (shared/scheduler/invoke-backoff.ts). Tests shorten it.
         */
        invokeBackoffMaxMs: z.number().int().min(1_000).max(15 * 60_000).default(60_000),
      })
      .prefault({}),
    /**
     * How wake-ups are timed (see shared/scheduler/wake-plan.ts). `precisionMs` is
     * EventBridge Scheduler's (60 s for `at()` and cron); only tests shorten
     * it, and the local runtime emulates whatever it is.
     */
    wake: z
      .object({
        precisionMs: z.number().int().min(100).default(60_000),
        startLeadMs: z.number().int().min(0).default(2_000),
        armSlackMs: z.number().int().min(0).default(3_000),
      })
      .prefault({}),
    rescuer: z
      .object({
        // While jobs run, the scheduler invokes the rescuer every minute;
        // this cron is the safety net, at the scheduler's.
        schedule: z.string().default(SAFETY_NET_SCHEDULE),
        timeoutSeconds: z.number().int().min(10).max(900).default(60),
        memoryMb: z.number().int().min(128).default(256),
      })
      .prefault({}),
    api: z
      .object({
        timeoutSeconds: z.number().int().min(1).max(900).default(29),
        memoryMb: z.number().int().min(128).default(512),
      })
      .prefault({}),
    alarms: z
      .object({
        oldestReadyAgeSeconds: z.number().int().positive().default(300),
        deadJobsThreshold: z.number().int().min(0).default(0),
        staleSettlesThreshold: z.number().int().min(0).default(0),
        /**
         * Minutes in a row with a ready job no runner can claim before the
         * UnservedJobs alarm fires (a deploy's own skew passes within it).
         */
        unservedMinutes: z.number().int().min(1).max(1_440).default(5),
        /**
         * The InvokeFailures alarm of a function fires when more than
         * `invokeFailureThreshold` of the scheduler's Invokes of it failed within
         * `invokeFailureMinutes` (a reset retried once passes; a throttle or a
         * missing function, retried with backoff, does not).
         */
        invokeFailureMinutes: z.number().int().min(1).max(1_440).default(5),
        invokeFailureThreshold: z.number().int().min(0).default(3),
      })
      .prefault({}),
    /** Finished jobs older than this are pruned by the rescuer. */
    retentionDays: z.number().int().positive().default(7),
    /** Set to run the consumer on Cloudflare Workers too (see docs/deploy.md); unset, Lambda only. */
    edge: edgeSchema.optional(),
  })
  .superRefine((config, ctx) => {
    const neededMs = schedulerTimeoutNeededMs(config.wake, config.scheduler.pollMs);
    if (neededMs > config.scheduler.timeoutSeconds * 1000) {
      ctx.addIssue({
        code: "custom",
        path: ["scheduler", "timeoutSeconds"],
        message: `timeout ${config.scheduler.timeoutSeconds}s cannot cover ${neededMs}ms: a sleep to a due time after an armed schedule fired late, and the margin`,
      });
    }
    for (const [name, runner] of Object.entries(config.runners)) {
      if (runner.light && lightRunner(name) in config.runners) {
        ctx.addIssue({ code: "custom", path: ["runners", name, "light"], message: `"${lightRunner(name)}" is already a runner: rename it, or drop this light variant` });
      }
      if (runner.maxLeaseMs + RUNNER_MARGIN_MS > runner.timeoutSeconds * 1000) {
        ctx.addIssue({
          code: "custom",
          path: ["runners", name, "timeoutSeconds"],
          message: `timeout ${runner.timeoutSeconds}s cannot cover a ${runner.maxLeaseMs}ms lease plus the ${RUNNER_MARGIN_MS}ms margin`,
        });
      }
    }
    for (const [name, runner] of Object.entries(config.edge?.runners ?? {})) {
      if (name in config.runners) {
        ctx.addIssue({ code: "custom", path: ["edge", "runners", name], message: `"${name}" is already a Lambda runner` });
      }
      if (runner.maxLeaseMs + RUNNER_MARGIN_MS > runner.wallMs) {
        ctx.addIssue({
          code: "custom",
          path: ["edge", "runners", name, "wallMs"],
          message: `wall-time budget ${runner.wallMs}ms cannot cover a ${runner.maxLeaseMs}ms lease plus the ${RUNNER_MARGIN_MS}ms margin`,
        });
      }
    }
  });

export type Config = z.output<typeof configSchema>;
export type ConfigInput = z.input<typeof configSchema>;
export type RunnerConfig = Config["runners"][string];
export type EdgeConfig = NonNullable<Config["edge"]>;
export type EdgeRunnerConfig = EdgeConfig["runners"][string];

export function defineConfig(input: ConfigInput = {}): Config {
  return configSchema.parse(input);
}
