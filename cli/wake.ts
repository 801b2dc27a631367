import { existsSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { lambdaClient } from "../functions/aws.ts";
import { atFallback, createSchedulerWaker } from "../functions/waker.ts";
import { DEV_AWS, sameDatabase, type DevStackState } from "../dev/state.ts";
import { schedulerFunctionName } from "../shared/settings/deployed.ts";
import { usageError } from "./errors.ts";

/**
 * Which scheduler the CLI wakes after an enqueue or retry commits, so the
 * job starts now rather than at the daily safety net. The first that applies:
 *
 * 1. `--stage <stage>`: the scheduler the component deployed to that SST
 *    stage, named from the app's name in `sst.config.ts` (shared/settings/deployed.ts);
 *    the AWS SDK finds credentials and region as `sst deploy` does.
 * 2. `LEASEHOLD_SCHEDULER_FUNCTION`: that function, with the SDK's defaults.
 * 3. The dev stack running in this directory (`.dev-data/stack.json`), when
 *    the CLI's database is its database.
 * 4. None: the CLI says why, and the job waits for the next wake-up.
 */
export type WakeTarget =
  | { kind: "stage"; functionName: string; stage: string }
  | { kind: "named"; functionName: string }
  | { kind: "dev"; functionName: string; lambdaUrl: string }
  | { kind: "none"; why: string };

export interface WakeSources {
  stage?: string;
  env: Record<string, string | undefined>;
  /** Where the app's sst.config.ts is. */
  appRoot: string;
  /** The database the command writes to. */
  databaseUrl: string;
  devState: DevStackState | null;
}

export async function resolveWakeTarget(o: WakeSources): Promise<WakeTarget> {
  if (o.stage !== undefined) {
    const app = await sstAppName(o.appRoot, o.stage);
    return { kind: "stage", stage: o.stage, functionName: schedulerFunctionName({ app, stage: o.stage }) };
  }
  const named = o.env.LEASEHOLD_SCHEDULER_FUNCTION;
  if (named) return { kind: "named", functionName: named };
  if (o.devState && sameDatabase(o.devState.databaseUrl, o.databaseUrl)) {
    return { kind: "dev", functionName: o.devState.schedulerFunction ?? "scheduler", lambdaUrl: o.devState.lambdaUrl };
  }
  const why = o.devState
    ? "the dev stack running here uses another database"
    : "no dev stack runs in this directory";
  return { kind: "none", why: `${why}, and neither --stage nor LEASEHOLD_SCHEDULER_FUNCTION names a deployed scheduler` };
}

/** The app's name, as `sst.config.ts`'s `app({ stage })` returns it (evaluated with SST's `$config` as the identity). */
export async function sstAppName(appRoot: string, stage: string): Promise<string> {
  if (!/^[A-Za-z0-9-]{1,64}$/.test(stage)) throw usageError(`--stage must be an SST stage name (letters, digits, -), got ${JSON.stringify(stage)}`);
  const file = join(appRoot, "sst.config.ts");
  if (!existsSync(file)) throw usageError(`--stage: no sst.config.ts in ${appRoot} to read the app's name from`);
  const globals = globalThis as { $config?: unknown };
  const before = globals.$config;
  globals.$config = (input: unknown) => input;
  try {
    const config = ((await import(pathToFileURL(file).href)) as { default?: { app?: (input: { stage: string }) => unknown } }).default;
    const app = (await config?.app?.({ stage })) as { name?: unknown } | undefined;
    if (typeof app?.name !== "string" || !app.name) throw new Error("its app() returns no name");
    return app.name;
  } catch (err) {
    throw usageError(`--stage: could not read the app's name from ${file}: ${(err as Error).message}`);
  } finally {
    globals.$config = before;
  }
}

/** Where the target is, in words, for messages. */
export function describeTarget(target: Exclude<WakeTarget, { kind: "none" }>): string {
  if (target.kind === "stage") return `${target.functionName} (stage ${target.stage})`;
  if (target.kind === "dev") return `the dev stack's scheduler (${target.lambdaUrl})`;
  return `${target.functionName} (LEASEHOLD_SCHEDULER_FUNCTION)`;
}

/** One asynchronous Invoke of the target, bounded as every wake-up is; rejects with the reason it failed. */
export async function invokeScheduler(target: Exclude<WakeTarget, { kind: "none" }>, env: Record<string, string | undefined> = {}): Promise<void> {
  const client = target.kind === "dev"
    ? lambdaClient({ endpoint: target.lambdaUrl, region: DEV_AWS.region, credentials: { accessKeyId: DEV_AWS.accessKeyId, secretAccessKey: DEV_AWS.secretAccessKey } })
    : lambdaClient();
  let failure: unknown;
  // LEASEHOLD_SCHEDULER_ARN and LEASEHOLD_WAKE_ROLE_ARN, when set with the function's name, arm the at() fallback as the API does.
  const fallback = target.kind === "named" ? atFallback(env) : undefined;
  const waker = createSchedulerWaker(target.functionName, (err) => (failure ??= err), client, fallback);
  try {
    waker.wake();
    await waker.settled();
  } finally {
    client.destroy();
  }
  if (failure !== undefined) throw failure;
}
