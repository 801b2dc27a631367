/**
 * Bootstrap of one local Lambda execution environment. The parent starts it
 * with `node --import tsx child.ts` and the function's Lambda variables in the
 * environment (`_HANDLER`, `LAMBDA_TASK_ROOT`, `AWS_LAMBDA_FUNCTION_*`). It
 * imports the handler module once (the cold start, timed by the parent from
 * spawn to "ready"), then runs one invocation
 * at a time as the parent asks over IPC, like Lambda's runtime loop.
 */
import type { Context } from "aws-lambda";
import { resolve } from "node:path";
import { existsSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { LOCAL_ENV } from "../local-env.ts";
import { toErrorBody, type ChildMessage, type InvokeMessage, type LambdaErrorBody } from "./protocol.ts";

type Handler = (event: unknown, context: Context, callback?: (error?: unknown, result?: unknown) => void) => unknown;

const MODULE_EXTENSIONS = [".ts", ".mts", ".js", ".mjs", ".cjs"];

let currentRequestId: string | null = null;

function send(message: ChildMessage, then?: () => void): void {
  process.send?.(message, undefined, undefined, then);
}

/** Sends every complete line written to stdout/stderr to the parent, tagged with the request id. */
function captureStream(stream: NodeJS.WriteStream, name: "stdout" | "stderr"): () => void {
  let partial = "";
  const flush = (text: string): void => {
    partial += text;
    const lines = partial.split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) send({ type: "log", requestId: currentRequestId, stream: name, line });
  };
  stream.write = ((chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
    flush(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"));
    const callback = rest.find((arg): arg is () => void => typeof arg === "function");
    callback?.();
    return true;
  }) as typeof stream.write;
  return () => {
    if (partial !== "") flush("\n");
  };
}

const flushers = [captureStream(process.stdout, "stdout"), captureStream(process.stderr, "stderr")];
const flushLogs = (): void => flushers.forEach((flush) => flush());

/** Splits `dir/module.export` like Lambda does: module up to the first dot after the last slash. */
async function loadHandler(spec: string, taskRoot: string): Promise<Handler> {
  const slash = spec.lastIndexOf("/");
  const dot = spec.indexOf(".", slash + 1);
  if (dot < 0) throw Object.assign(new Error(`Bad handler ${spec}: expected module.export`), { name: "Runtime.MalformedHandlerName" });
  const base = resolve(taskRoot, spec.slice(0, dot));
  const file = MODULE_EXTENSIONS.map((ext) => base + ext).find((candidate) => existsSync(candidate));
  if (!file) throw Object.assign(new Error(`Cannot find module '${spec.slice(0, dot)}'`), { name: "Runtime.ImportModuleError" });
  let target: unknown = await import(pathToFileURL(file).href);
  for (const key of spec.slice(dot + 1).split(".")) {
    target = (target as Record<string, unknown> | undefined)?.[key];
  }
  if (typeof target !== "function") {
    throw Object.assign(new Error(`${spec} is undefined or not exported`), { name: "Runtime.HandlerNotFound" });
  }
  return target as Handler;
}

function makeContext(message: InvokeMessage): Context {
  const env = process.env;
  const functionName = env.AWS_LAMBDA_FUNCTION_NAME ?? "";
  const unsupported = (): never => {
    throw new Error("context.done/fail/succeed are not supported; return a value or throw");
  };
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: env.AWS_LAMBDA_FUNCTION_VERSION ?? "$LATEST",
    invokedFunctionArn: env.LEASEHOLD_LAMBDA_ARN ?? functionName,
    memoryLimitInMB: env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE ?? "128",
    awsRequestId: message.requestId,
    logGroupName: env.AWS_LAMBDA_LOG_GROUP_NAME ?? "",
    logStreamName: env.AWS_LAMBDA_LOG_STREAM_NAME ?? "",
    getRemainingTimeInMillis: () => Math.max(0, message.deadlineMs - Date.now()),
    done: unsupported,
    fail: unsupported,
    succeed: unsupported,
  };
}

/** Calls an async handler, or a callback-style one (three parameters, no promise). */
function callHandler(handler: Handler, event: unknown, context: Context): Promise<unknown> {
  return new Promise((resolvePromise, reject) => {
    const callback = (error?: unknown, result?: unknown): void => (error ? reject(error) : resolvePromise(result));
    const returned = handler(event, context, callback);
    if (returned instanceof Promise || handler.length < 3) Promise.resolve(returned).then(resolvePromise, reject);
  });
}

function finish(requestId: string, outcome: { payload: string } | { error: LambdaErrorBody }, then?: () => void): void {
  flushLogs();
  currentRequestId = null;
  const message: ChildMessage =
    "payload" in outcome ? { type: "result", requestId, payload: outcome.payload } : { type: "error", requestId, error: outcome.error };
  send(message, then);
}

async function invoke(handler: Handler, message: InvokeMessage): Promise<void> {
  currentRequestId = message.requestId;
  process.env._X_AMZN_TRACE_ID = `Root=1-${Math.floor(Date.now() / 1000).toString(16)}-${message.requestId.replace(/-/g, "").slice(0, 24)}`;
  try {
    const event: unknown = message.payload.trim() === "" ? {} : JSON.parse(message.payload);
    const result = await callHandler(handler, event, makeContext(message));
    finish(message.requestId, { payload: JSON.stringify(result === undefined ? null : result) });
  } catch (thrown) {
    finish(message.requestId, { error: toErrorBody(thrown) });
  }
}

/** An error nobody awaited ends the environment, as on Lambda; the invocation reports it first. */
function crash(thrown: unknown, errorType: string): void {
  const error = { ...toErrorBody(thrown, errorType), errorType };
  const exit = (): never => process.exit(1);
  if (currentRequestId) return finish(currentRequestId, { error }, exit);
  flushLogs();
  send({ type: "log", requestId: null, stream: "stderr", line: `${errorType}: ${error.errorMessage}` }, exit);
}

async function main(): Promise<void> {
  // A bundle's source map (dev/functions.ts writes one) maps stacks to the app's own files, as --enable-source-maps does;
  // unless told not to (the scenarios, timing cold starts as Lambda has them: without).
  if (process.env[LOCAL_ENV.sourceMaps] !== "0") process.setSourceMapsEnabled(true);
  process.on("disconnect", () => process.exit());
  process.on("uncaughtException", (error) => crash(error, "Runtime.UncaughtException"));
  process.on("unhandledRejection", (reason) => crash(reason, "Runtime.UnhandledPromiseRejection"));
  let handler: Handler;
  try {
    handler = await loadHandler(process.env._HANDLER ?? "", process.env.LAMBDA_TASK_ROOT ?? process.cwd());
  } catch (thrown) {
    flushLogs();
    send({ type: "initError", error: toErrorBody(thrown, "Runtime.ImportModuleError") });
    return;
  }
  flushLogs();
  process.on("message", (message: InvokeMessage) => {
    if (message.type === "invoke") void invoke(handler, message);
  });
  send({ type: "ready" });
}

void main();
