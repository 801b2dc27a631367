/**
 * Wakes the scheduler after an enqueue commits: what the API does, what the
 * CLI does, and what an app's own route should do (`schedulerWaker()` then
 * `waker.wake()` after its transaction commits). An asynchronous Invoke of
 * the scheduler with `{"source":"leasehold.wake"}`, coalesced by `createWaker`.
 *
 * Bounded: the Invoke has `AWS_CALL_TIMEOUT_MS` in all. If it has not answered
 * within `FALLBACK_AFTER_MS` (Lambda throttling, a network hang) and a
 * fallback is given, a one-time EventBridge schedule `at(now)` is armed as
 * well, so the job starts within the schedule's precision (60 s) even if the
 * Invoke never lands. Callers on a request path wait `WAKE_WAIT_MS` at most.
 */
import type { LambdaClient } from "@aws-sdk/client-lambda";
import type { SchedulerClient } from "@aws-sdk/client-scheduler";
import { Resource } from "sst";
import { resolveSettings } from "../shared/settings/settings.ts";
import { createWaker, WAKE_EVENT, type Waker } from "../shared/scheduler/wake.ts";
import { DEV_AWS, readDevStackState, type DevStackState } from "../dev/state.ts";
import type { Pool } from "../shared/db/db.ts";
import { openPool, type LinkedResources } from "./env.ts";
import { processEnvironment, readEnvironment, type EnvSource } from "../shared/settings/environment.ts";
import { armWake, invokeAsync, lambdaClient, schedulerClient, type ArmTarget } from "./aws.ts";

export { WAKE_EVENT };
/** An Invoke not answered by then gets the at() fallback beside it. */
export const FALLBACK_AFTER_MS = 250;
/** The longest a request path waits for its wake-up before answering anyway. */
export const WAKE_WAIT_MS = 500;

/**
 * A waker that invokes `functionName`; with no function name, one that does
 * nothing. `fallback` arms the at() schedule when the Invoke is slow or fails.
 */
export function createSchedulerWaker(
  functionName: string | undefined,
  onError: (err: unknown) => void,
  client: LambdaClient = lambdaClient(),
  fallback?: () => Promise<void>,
): Waker {
  if (!functionName) return { wake() {}, settled: async () => {} };
  return createWaker(
    async () => {
      const invoked = invokeAsync(client, functionName, WAKE_EVENT).then(() => "ok" as const, (err: unknown) => err);
      if (!fallback) {
        const result = await invoked;
        if (result !== "ok") throw result;
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      const slow = new Promise<"slow">((resolve) => (timer = setTimeout(() => resolve("slow"), FALLBACK_AFTER_MS)));
      const first = await Promise.race([invoked, slow]);
      clearTimeout(timer);
      if (first === "ok") return;
      if (first !== "slow") onError(first);
      await fallback();
    },
    { onError },
  );
}

/** The at() fallback, from the environment infra sets (LEASEHOLD_SCHEDULER_ARN, LEASEHOLD_WAKE_ROLE_ARN). */
export function atFallback(source: EnvSource = processEnvironment()): (() => Promise<void>) | undefined {
  const env = readEnvironment(source);
  const functionArn = env.schedulerArn;
  const roleArn = env.wakeRoleArn;
  if (!functionArn || !roleArn) return undefined;
  const target: ArmTarget = { prefix: env.wakePrefix, functionArn, roleArn };
  let client: Promise<SchedulerClient> | undefined;
  return async () => void (await armWake(await (client ??= schedulerClient()), target, Date.now(), WAKE_EVENT));
}

/** The waker an app's route uses, configured from the environment infra links to it. */
export function schedulerWaker(onError: (err: unknown) => void = () => {}): Waker {
  return createSchedulerWaker(readEnvironment().schedulerFunction, onError, lambdaClient(), atFallback());
}

/** What the component's link (`link: [leasehold.link]`) gives a function, as `Resource.<name>`. */
interface LinkProperties {
  schema?: string;
  databaseUrl?: string;
  schedulerFunction?: string;
  schedulerArn?: string;
  wakeRoleArn?: string;
  wakePrefix?: string;
}

/** Leasehold as an app's own function or local server reaches it: see linkedLeasehold(). */
export interface LinkedLeasehold {
  schema: string;
  databaseUrl: string | undefined;
  /** The WebSocket relay ("host:port") in front of a plain Postgres: the dev stack's, when it is the source; else unset. */
  wsProxy: string | undefined;
  /** Where the settings came from. */
  source: "link" | "environment" | "dev stack" | "none";
  /** Wake the scheduler with it after a commit that enqueued (then `settleBriefly(waker)` before the response). */
  waker: Waker;
  /**
   * A Neon pool on the database (through the relay when there is one), for
   * one request or invocation: `end()` it after. Throws, naming what
   * linkedLeasehold() reads, when none of it gives a database URL.
   */
  pool(max?: number): Pool;
}

/** What linkedLeasehold() reads, in order: for its documentation and its error. */
export const LINKED_SOURCES =
  "the component's link (Resource.Leasehold, from `link: [leasehold.link]` in sst.config.ts); else the environment variables " +
  "DATABASE_URL, LEASEHOLD_SCHEMA and LEASEHOLD_SCHEDULER_FUNCTION (with the AWS SDK's AWS_ENDPOINT_URL_LAMBDA, " +
  "AWS_REGION and credentials); else, locally, the dev stack that `npx leasehold dev` runs in the working directory " +
  "(its .dev-data/stack.json, with its database's WebSocket relay)";

/** The link's properties, or none outside a linked function (SST's Resource throws there). */
function linkProperties(resources: LinkedResources, name: string): LinkProperties {
  try {
    return ((resources as Record<string, unknown>)[name] as LinkProperties | undefined) ?? {};
  } catch {
    return {};
  }
}

/**
 * Leasehold as a function the component is linked to sees it: the schema,
 * the database URL, a pool on it and a waker for after commit. Resolved from
 * the first of these that gives a database URL: the link; the environment
 * (DATABASE_URL, LEASEHOLD_SCHEMA, LEASEHOLD_SCHEDULER_FUNCTION: a database
 * the Neon driver reaches as it is); the dev stack running in the working
 * directory (`npx leasehold dev`'s `.dev-data/stack.json`: its database,
 * through its WebSocket relay), so an app's own local server needs nothing
 * set while the dev stack runs.
 */
export function linkedLeasehold(
  options: {
    name?: string;
    resources?: LinkedResources;
    env?: Record<string, string | undefined>;
    /** The running dev stack (default: read from `.dev-data/stack.json`, when neither link nor environment gives a database). */
    devState?: DevStackState | null;
    onError?: (err: unknown) => void;
  } = {},
): LinkedLeasehold {
  const link = linkProperties(options.resources ?? (Resource as unknown as LinkedResources), options.name ?? "Leasehold");
  const given = options.env ?? processEnvironment();
  const dev = link.databaseUrl || given.DATABASE_URL ? null : options.devState !== undefined ? options.devState : readDevStackState();
  const env = dev ? { ...given, ...dev.env } : given;
  const source = link.databaseUrl ? "link" : given.DATABASE_URL ? "environment" : dev ? "dev stack" : "none";
  const settings = resolveSettings({ given: { schema: link.schema, databaseUrl: link.databaseUrl }, env });
  const fallbackEnv = { ...env, LEASEHOLD_SCHEDULER_ARN: link.schedulerArn ?? env.LEASEHOLD_SCHEDULER_ARN, LEASEHOLD_WAKE_ROLE_ARN: link.wakeRoleArn ?? env.LEASEHOLD_WAKE_ROLE_ARN, LEASEHOLD_WAKE_PREFIX: link.wakePrefix ?? env.LEASEHOLD_WAKE_PREFIX };
  const client = dev
    ? lambdaClient({ endpoint: dev.lambdaUrl, region: DEV_AWS.region, credentials: { accessKeyId: DEV_AWS.accessKeyId, secretAccessKey: DEV_AWS.secretAccessKey } })
    : lambdaClient();
  const waker = createSchedulerWaker(link.schedulerFunction ?? readEnvironment(env).schedulerFunction, options.onError ?? (() => {}), client, atFallback(fallbackEnv));
  // A relay only with the dev stack's own database: the stack publishes it beside its URL.
  const wsProxy = dev?.wsProxy;
  return {
    schema: settings.schema,
    databaseUrl: settings.databaseUrl,
    wsProxy,
    source,
    waker,
    pool(max = 5) {
      if (!settings.databaseUrl) throw new Error(`linkedLeasehold(): no database URL. It reads ${LINKED_SOURCES}; none of them is there.`);
      return openPool(settings, max, wsProxy);
    },
  };
}

/** Waits for `waker` to settle, but no longer than `WAKE_WAIT_MS`: a hung wake-up never holds a response. */
export async function settleBriefly(waker: Waker, waitMs = WAKE_WAIT_MS): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const done = await Promise.race([
    waker.settled().then(() => true),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), waitMs))),
  ]);
  clearTimeout(timer);
  return done;
}
