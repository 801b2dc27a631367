/**
 * Messages between the local Lambda runtime (parent) and one execution
 * environment (a child process running `child.ts`), sent over Node IPC.
 * IPC keeps the order of a child's messages, so every log line an invocation
 * writes reaches the parent before that invocation's result.
 */

/** The error body Lambda returns with `X-Amz-Function-Error: Unhandled`. */
export interface LambdaErrorBody {
  errorMessage: string;
  errorType: string;
  stackTrace: string[];
}

/** Parent → child: run the handler once. */
export interface InvokeMessage {
  type: "invoke";
  requestId: string;
  /** The raw request body; an empty body is passed to the handler as `{}`. */
  payload: string;
  /** Epoch ms at which the parent kills the process. */
  deadlineMs: number;
}

/** Child → parent. */
export type ChildMessage =
  | { type: "ready" }
  | { type: "initError"; error: LambdaErrorBody }
  | { type: "log"; requestId: string | null; stream: "stdout" | "stderr"; line: string }
  | { type: "result"; requestId: string; payload: string }
  | { type: "error"; requestId: string; error: LambdaErrorBody };

/** Turns anything thrown into Lambda's error body. */
export function toErrorBody(thrown: unknown, fallbackType = "Error"): LambdaErrorBody {
  if (thrown instanceof Error) {
    const stack = thrown.stack?.split("\n").slice(1).map((line) => line.trim()) ?? [];
    // A subclass that does not set `name` still reports its class name.
    const type = thrown.name === "Error" ? thrown.constructor.name : thrown.name;
    return { errorMessage: thrown.message, errorType: type || fallbackType, stackTrace: stack };
  }
  const message = typeof thrown === "string" ? thrown : JSON.stringify(thrown) ?? String(thrown);
  return { errorMessage: message, errorType: fallbackType, stackTrace: [] };
}
