/**
 * The API's waker: after an enqueue commits, an asynchronous invoke of the
 * scheduler with `{"source":"leasehold.wake"}`, coalesced by `createWaker`.
 */
import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { createWaker, type Waker } from "../../shared/wake.ts";

export const WAKE_EVENT = { source: "leasehold.wake" } as const;

/** A waker that invokes `functionName`; with no function name, one that does nothing. */
export function createSchedulerWaker(
  functionName: string | undefined,
  onError: (err: unknown) => void,
  client: LambdaClient = new LambdaClient({}),
): Waker {
  if (!functionName) return { wake() {}, settled: async () => {} };
  const payload = new TextEncoder().encode(JSON.stringify(WAKE_EVENT));
  return createWaker(
    async () => {
      await client.send(new InvokeCommand({ FunctionName: functionName, InvocationType: "Event", Payload: payload }));
    },
    { onError },
  );
}
