/**
 * Every AWS call Leasehold makes goes through these clients, and every one
 * has a bound: a connection timeout, a request timeout and a retry cap on
 * the client, and an AbortSignal on the call. A hung Invoke or CreateSchedule
 * costs at most `AWS_CALL_TIMEOUT_MS`, never a function's whole timeout.
 */
import { InvokeCommand, LambdaClient, type LambdaClientConfig } from "@aws-sdk/client-lambda";
import type { SchedulerClient } from "@aws-sdk/client-scheduler";

/** One call, retries included. */
export const AWS_CALL_TIMEOUT_MS = 2_000;
// throwOnRequestTimeout: without it, this SDK only warns when a request exceeds requestTimeout.
const requestHandler = { connectionTimeout: 500, requestTimeout: 900, throwOnRequestTimeout: true };

/**
 * `config`: an endpoint, region or credentials other than the SDK's defaults
 * (the dev stack's local runtime); `maxAttempts: 1` for a caller that decides
 * its own retries (the scheduler: shared/scheduler/invoke-backoff.ts).
 */
export function lambdaClient(config: LambdaClientConfig = {}): LambdaClient {
  return new LambdaClient({ requestHandler, maxAttempts: 2, ...config });
}

/**
 * Loaded on first use: most invocations arm nothing, and a cold start should
 * not pay for loading the Scheduler SDK.
 */
export async function schedulerClient(): Promise<SchedulerClient> {
  const { SchedulerClient } = await import("./scheduler-sdk.ts");
  return new SchedulerClient({ requestHandler, maxAttempts: 2 });
}

/** An asynchronous invoke (`InvocationType: "Event"`), bounded. */
export async function invokeAsync(client: LambdaClient, functionName: string, payload: unknown, timeoutMs = AWS_CALL_TIMEOUT_MS): Promise<void> {
  await client.send(
    new InvokeCommand({ FunctionName: functionName, InvocationType: "Event", Payload: JSON.stringify(payload) }),
    { abortSignal: AbortSignal.timeout(timeoutMs) },
  );
}

export interface ArmTarget {
  /** Prefix of the schedule names, unique per deployment (stage). */
  prefix: string;
  /** The scheduler function's ARN (from its context). */
  functionArn: string;
  /** The role EventBridge Scheduler assumes to invoke it. */
  roleArn: string;
  groupName?: string;
}

/** `at(yyyy-mm-ddThh:mm:ss)`, UTC. */
export function atExpression(atMs: number): string {
  return `at(${new Date(atMs).toISOString().slice(0, 19)})`;
}

/**
 * Arms a one-time schedule that invokes the scheduler at `atMs` (within the
 * schedule's precision) and deletes itself once it has. Named after its
 * time, so schedulers arming the same second make one schedule, not two.
 * Returns the schedule's name.
 */
export async function armWake(client: SchedulerClient, target: ArmTarget, atMs: number, payload: unknown): Promise<string> {
  const { ConflictException, CreateScheduleCommand } = await import("./scheduler-sdk.ts");
  const name = `${target.prefix}-${Math.floor(atMs / 1000)}`.slice(0, 64);
  try {
    await client.send(
      new CreateScheduleCommand({
        Name: name,
        GroupName: target.groupName,
        ScheduleExpression: atExpression(atMs),
        ScheduleExpressionTimezone: "UTC",
        FlexibleTimeWindow: { Mode: "OFF" },
        ActionAfterCompletion: "DELETE",
        Target: { Arn: target.functionArn, RoleArn: target.roleArn, Input: JSON.stringify(payload) },
      }),
      { abortSignal: AbortSignal.timeout(AWS_CALL_TIMEOUT_MS) },
    );
  } catch (err) {
    if (!(err instanceof ConflictException)) throw err;
  }
  return name;
}

/** Deletes a schedule `armWake` armed (by its name), bounded; one already gone (fired) is no error. */
export async function disarmWake(client: SchedulerClient, name: string, groupName?: string): Promise<void> {
  const { DeleteScheduleCommand, ResourceNotFoundException } = await import("./scheduler-sdk.ts");
  try {
    await client.send(new DeleteScheduleCommand({ Name: name, GroupName: groupName }), { abortSignal: AbortSignal.timeout(AWS_CALL_TIMEOUT_MS) });
  } catch (err) {
    if (!(err instanceof ResourceNotFoundException)) throw err;
  }
}
