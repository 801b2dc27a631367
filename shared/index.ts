/** Leasehold's queue core: everything an app or a function needs. */
export { defineJob, createRegistry } from "./jobs/job.ts";
export type { JobType, JobContext, JobStatus, AttemptOutcome, EnqueueOptions, EnqueuedJob, Registry, Debounce, Throttle } from "./jobs/job.ts";
export type { RateLimit } from "./jobs/rate-limit.ts";
export { enqueue, enqueueJobs, job, type JobSpec, type EnqueueLimits } from "./jobs/enqueue.ts";
export { claimable, servingRules, type Claimable, type ServingRules } from "./settings/serving.ts";
export { claimJobs, type ClaimedJob } from "./lifecycle/claim.ts";
export { completeJobs, failJobs, releaseJobs, extendLease, settleJobs } from "./lifecycle/settle.ts";
export { rescueExpiredLeases, type RescueResult } from "./lifecycle/rescue.ts";
export { describeDeaths, type DeadJob } from "./observe/deaths.ts";
export { cancelJob, retryJob } from "./lifecycle/manual.ts";
export { getJob, listJobs, type JobRecord, type JobDetail, type AttemptRecord } from "./observe/admin.ts";
export { waitForJob, WaitTimeoutError, type JobEnd, type WaitOptions } from "./observe/wait.ts";
export { queueStats, countReady, pruneJobs, type QueueStats } from "./observe/stats.ts";
export { runWorker, type WorkerOptions, type WorkerSummary } from "./runner/worker.ts";
export { migrate } from "./db/migrate.ts";
export { transaction, type Queryable, type Pool, type Store } from "./db/db.ts";
export { ValidationError, UnknownJobTypeError, PermanentError } from "./errors.ts";
export { defineConfig, DEFAULT_QUEUE, DEFAULT_SCHEMA, type Config, type ConfigInput } from "./settings/config.ts";
export { defineRecurring, type RecurringJob } from "./jobs/recurring.ts";
export { resolveSettings, type Settings } from "./settings/settings.ts";
/**
 * The zod the job schemas are written with: one copy, the package's own. A
 * bundle that uses this `z` holds all of zod; `import * as z from
 * "leasehold/zod"` holds only what its schemas use (shared/zod.ts).
 */
export { z } from "zod";
