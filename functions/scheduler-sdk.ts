/**
 * The EventBridge Scheduler SDK, for `import()` on first use (functions/aws.ts): a module of ours that imports the
 * CommonJS SDK statically. Imported dynamically and directly, the SDK's named exports are lost in a bundle built with
 * splitting (esbuild hands back only its `default`); through an ES module of our own they come through intact.
 */
export { ConflictException, CreateScheduleCommand, DeleteScheduleCommand, ResourceNotFoundException, SchedulerClient } from "@aws-sdk/client-scheduler";
