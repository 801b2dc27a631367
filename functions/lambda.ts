/**
 * The handler factories an app's function entries call (`leasehold/lambda`).
 * Each takes the app's job types, recurring jobs and config, and returns the
 * Lambda handler. The SST component generates one entry per function
 * (functions/entries.ts); `leasehold dev` runs the very same entries.
 */
export { createRunnerHandler, type RunnerHandlerOptions } from "./runner.ts";
export { createSchedulerHandler } from "./scheduler.ts";
export { createRescuerHandler } from "./rescuer.ts";
export { createApiHandler, type ApiHandlerOptions } from "./api.ts";
export { createMigrateHandler } from "./migrate.ts";
export type { LeaseholdApp } from "./app.ts";
/** The Neon pool the functions use (over WebSocket; `wsProxy` for a local relay). */
export { createNeonPool } from "../shared/db/drivers/neon.ts";
export { linkedLeasehold, schedulerWaker, settleBriefly } from "./waker.ts";
