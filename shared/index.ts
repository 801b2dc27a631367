/** Leasehold's queue core: everything an app or a function needs. */
export { defineJob, createRegistry } from "./job.ts";
export type { JobType, JobContext, JobStatus, AttemptOutcome, EnqueueOptions, EnqueuedJob, Registry, Debounce, Throttle } from "./job.ts";
export type { RateLimit } from "./rate-limit.ts";
export { enqueue, enqueueJobs, job, type JobSpec, type EnqueueLimits } from "./enqueue.ts";
export { claimable, servingRules, type Claimable, type ServingRules } from "./serving.ts";
export { claimJobs, type ClaimedJob } from "./claim.ts";
export { completeJobs, failJobs, releaseJobs, extendLease, settleJobs } from "./settle.ts";
export { rescueExpiredLeases, type RescueResult } from "./rescue.ts";
export { describeDeaths, type DeadJob } from "./deaths.ts";
export { cancelJob, retryJob, getJob, listJobs, type JobRecord, type JobDetail, type AttemptRecord } from "./admin.ts";
export { waitForJob, WaitTimeoutError, type JobEnd, type WaitOptions } from "./wait.ts";
export { queueStats, countReady, pruneJobs, type QueueStats } from "./stats.ts";
export { runWorker, type WorkerOptions, type WorkerSummary } from "./worker.ts";
export { migrate } from "./migrate.ts";
export { transaction, type Queryable, type Pool, type Store } from "./db.ts";
export { ValidationError, UnknownJobTypeError, PermanentError } from "./errors.ts";
export { defineConfig, DEFAULT_QUEUE, DEFAULT_SCHEMA, type Config, type ConfigInput } from "./config.ts";
export { defineRecurring, type RecurringJob } from "./recurring.ts";
export { resolveSettings, type Settings } from "./settings.ts";
/** The zod the job schemas are written with: one copy, the package's own. */
export { z } from "zod";
