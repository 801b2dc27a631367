import { LIGHT_MAX_CONCURRENCY, lightRunner, type Config } from "./config.ts";
import { writeEnvironment } from "./environment.ts";

/**
 * The Lambda functions a config makes: the runners (and their light
 * variants), the scheduler, the rescuer, the API and the migration, each
 * with its size, timeout and environment, as the SST component (infra/) and
 * the local runtime (dev/) both create them.
 */

/** Lambda functions as infra and the local runtime see them. */
export interface FunctionSpec {
  name: string;
  handler: string;
  timeoutSeconds: number;
  memoryMb: number;
  /** EventBridge schedule expression for cron-triggered functions. */
  schedule?: string;
  /**
   * Where an asynchronous invocation that fails (a crash, an out-of-memory
   * kill, a timeout) is sent: a Lambda on-failure destination, by function
   * name. A runner's is the scheduler, which then watches the leases it left.
   */
  onFailure?: string;
  environment?: Record<string, string>;
}

/** Where the function entries live in an app (functions/entries.ts writes them; relative to the app's root). */
export const ENTRIES_DIR = ".leasehold/functions";

/** One runner function: a config runner, or its light variant. */
export interface RunnerFunction {
  /** Function name (and the runner's name in the fleet). */
  name: string;
  /** Its config.runners key. */
  runner: string;
  light: boolean;
  memoryMb: number;
  slots: number;
  maxConcurrency: number;
}

export function runnerFunctions(cfg: Config): RunnerFunction[] {
  return Object.entries(cfg.runners).flatMap(([name, r]) => [
    { name, runner: name, light: false, memoryMb: r.memoryMb, slots: r.slots, maxConcurrency: r.maxConcurrency },
    ...(r.light ? [{ name: lightRunner(name), runner: name, light: true, ...r.light, maxConcurrency: LIGHT_MAX_CONCURRENCY }] : []),
  ]);
}

/** `entriesDir`: the directory of the entries, relative to the root the handlers are resolved from. */
export function functionSpecs(cfg: Config, entriesDir: string = ENTRIES_DIR): FunctionSpec[] {
  const runners = runnerFunctions(cfg).map((f): FunctionSpec => ({
    name: f.name,
    handler: `${entriesDir}/runner.handler`,
    timeoutSeconds: cfg.runners[f.runner]!.timeoutSeconds,
    memoryMb: f.memoryMb,
    environment: writeEnvironment<string>({ runner: f.runner, runnerVariant: f.light ? "light" : undefined }),
    onFailure: "scheduler",
  }));
  return [
    ...runners,
    { name: "scheduler", handler: `${entriesDir}/scheduler.handler`, ...cfg.scheduler },
    { name: "rescuer", handler: `${entriesDir}/rescuer.handler`, ...cfg.rescuer },
    { name: "api", handler: `${entriesDir}/api.handler`, ...cfg.api },
    { name: "migrate", handler: `${entriesDir}/migrate.handler`, timeoutSeconds: 300, memoryMb: 512 },
  ];
}
