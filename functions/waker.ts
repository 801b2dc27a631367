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
import { resolveSettings } from "../shared/settings.ts";
import { createWaker, type Waker } from "../shared/wake.ts";
import type { LinkedResources } from "./env.ts";
import { armWake, invokeAsync, lambdaClient, schedulerClient, type ArmTarget } from "./aws.ts";

export const WAKE_EVENT = { source: "leasehold.wake" } as const;
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
export function atFallback(env: Record<string, string | undefined> = process.env): (() => Promise<void>) | undefined {
  const functionArn = env.LEASEHOLD_SCHEDULER_ARN;
  const roleArn = env.LEASEHOLD_WAKE_ROLE_ARN;
  if (!functionArn || !roleArn) return undefined;
  const target: ArmTarget = { prefix: env.LEASEHOLD_WAKE_PREFIX || "leasehold-wake", functionArn, roleArn, groupName: env.LEASEHOLD_WAKE_GROUP || undefined };
  let client: Promise<SchedulerClient> | undefined;
  return async () => void (await armWake(await (client ??= schedulerClient()), target, Date.now(), WAKE_EVENT));
}

/** The waker an app's route uses, configured from the environment infra links to it. */
export function schedulerWaker(onError: (err: unknown) => void = () => {}): Waker {
  return createSchedulerWaker(process.env.LEASEHOLD_SCHEDULER_FUNCTION, onError, lambdaClient(), atFallback());
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

/**
 * Leasehold as a function the component is linked to sees it: the schema,
 * the database URL and a waker for after commit. Resolved as everywhere
 * (shared/settings.ts): the link first, then the environment (DATABASE_URL,
 * LEASEHOLD_SCHEMA, LEASEHOLD_SCHEDULER_FUNCTION locally), then defaults.
 */
export function linkedLeasehold(
  options: { name?: string; resources?: LinkedResources; env?: Record<string, string | undefined>; onError?: (err: unknown) => void } = {},
): { schema: string; databaseUrl: string | undefined; waker: Waker } {
  const env = options.env ?? process.env;
  const resources = options.resources ?? (Resource as unknown as LinkedResources);
  let link: LinkProperties = {};
  try {
    link = ((resources as Record<string, unknown>)[options.name ?? "Leasehold"] as LinkProperties | undefined) ?? {};
  } catch {
    // SST's Resource throws outside a linked function: no link, the environment decides.
  }
  const settings = resolveSettings({ given: { schema: link.schema, databaseUrl: link.databaseUrl }, env });
  const fallbackEnv = { ...env, LEASEHOLD_SCHEDULER_ARN: link.schedulerArn ?? env.LEASEHOLD_SCHEDULER_ARN, LEASEHOLD_WAKE_ROLE_ARN: link.wakeRoleArn ?? env.LEASEHOLD_WAKE_ROLE_ARN, LEASEHOLD_WAKE_PREFIX: link.wakePrefix ?? env.LEASEHOLD_WAKE_PREFIX };
  const waker = createSchedulerWaker(link.schedulerFunction ?? env.LEASEHOLD_SCHEDULER_FUNCTION, options.onError ?? (() => {}), lambdaClient(), atFallback(fallbackEnv));
  return { schema: settings.schema, databaseUrl: settings.databaseUrl, waker };
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
