/**
 * The HTTP face of the local runtime: Lambda's Invoke API
 * (`POST /2015-03-31/functions/{name}/invocations`) answered the way the AWS
 * SDK expects — status codes, `X-Amz-*` headers, and errors as
 * `x-amzn-ErrorType` + `{Type, message}` so the SDK throws the right class.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { InvocationReport } from "./environment.ts";
import type { Schedules } from "./eventbridge.ts";
import { handleSchedulerApi, isSchedulerPath } from "./scheduler-api.ts";

export type InvocationType = "RequestResponse" | "Event" | "DryRun";

export type InvokeResult =
  | { status: "notFound"; arn: string }
  | { status: "throttled" }
  | { status: "accepted"; requestId: string }
  | { status: "done"; requestId: string; report: InvocationReport; logTail?: string };

export interface InvokeBackend {
  invoke(name: string, type: InvocationType, payload: string, tail: boolean): Promise<InvokeResult>;
  /** EventBridge Scheduler's API on the same endpoint, when emulated. */
  schedules?: Schedules;
}

/** Lambda's request payload limits. */
export const SYNC_PAYLOAD_LIMIT_BYTES = 6 * 1024 * 1024;
export const EVENT_PAYLOAD_LIMIT_BYTES = 256 * 1024;
const INVOKE_PATH = /^\/2015-03-31\/functions\/([^/]+)\/invocations\/?$/;
const INVOCATION_TYPES: readonly string[] = ["RequestResponse", "Event", "DryRun"];

export function createInvokeServer(backend: InvokeBackend): Server {
  return createServer((req, res) => {
    handle(backend, req, res).catch((error: unknown) => {
      sendError(res, 500, "ServiceException", error instanceof Error ? error.message : String(error));
    });
  });
}

/** `name`, `name:qualifier`, `123456789012:function:name` or a full ARN → `name`. */
export function functionNameOf(raw: string): string {
  const parts = raw.split(":");
  const index = parts.indexOf("function");
  return (index >= 0 ? parts[index + 1] : parts[0]) ?? raw;
}

async function handle(backend: InvokeBackend, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://localhost");
  if (backend.schedules && isSchedulerPath(url.pathname)) return handleSchedulerApi(backend.schedules, req, res);
  const match = INVOKE_PATH.exec(url.pathname);
  if (req.method !== "POST" || !match?.[1]) {
    req.resume();
    return sendError(res, 404, "UnknownOperationException", `Unknown operation ${req.method} ${url.pathname}`);
  }
  const name = functionNameOf(decodeURIComponent(match[1]));
  const type = header(req, "x-amz-invocation-type") ?? "RequestResponse";
  if (!INVOCATION_TYPES.includes(type)) {
    req.resume();
    return sendError(res, 400, "InvalidParameterValueException", `Invalid InvocationType: ${type}`);
  }
  const limit = type === "Event" ? EVENT_PAYLOAD_LIMIT_BYTES : SYNC_PAYLOAD_LIMIT_BYTES;
  const payload = await readBody(req, limit);
  if (payload === undefined) {
    return sendError(res, 413, "RequestTooLargeException", `Request must be smaller than ${limit} bytes for the InvokeFunction operation`);
  }
  if (!isJsonOrEmpty(payload)) {
    return sendError(res, 400, "InvalidRequestContentException", "Could not parse request body into json");
  }
  const result = await backend.invoke(name, type as InvocationType, payload, header(req, "x-amz-log-type") === "Tail");
  switch (result.status) {
    case "notFound":
      return sendError(res, 404, "ResourceNotFoundException", `Function not found: ${result.arn}`);
    case "throttled":
      res.setHeader("Retry-After", "1");
      return sendError(res, 429, "TooManyRequestsException", "Rate Exceeded.", {
        Reason: "ReservedFunctionConcurrentInvocationLimitExceeded",
      });
    case "accepted":
      res.writeHead(type === "DryRun" ? 204 : 202, { "x-amzn-RequestId": result.requestId, "X-Amz-Executed-Version": "$LATEST" });
      return void res.end();
    case "done":
      return sendReport(res, result.requestId, result.report, result.logTail);
  }
}

function sendReport(res: ServerResponse, requestId: string, report: InvocationReport, logTail?: string): void {
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    "x-amzn-RequestId": requestId,
    "X-Amz-Executed-Version": "$LATEST",
  };
  if (logTail !== undefined) headers["X-Amz-Log-Result"] = logTail;
  const { outcome } = report;
  if (outcome.kind === "error") headers["X-Amz-Function-Error"] = "Unhandled";
  res.writeHead(200, headers);
  res.end(outcome.kind === "result" ? outcome.payload : JSON.stringify(outcome.error));
}

function sendError(res: ServerResponse, status: number, errorType: string, message: string, extra: object = {}): void {
  if (res.headersSent) return void res.end();
  res.writeHead(status, { "Content-Type": "application/json", "x-amzn-ErrorType": errorType });
  res.end(JSON.stringify({ Type: status >= 500 ? "Service" : "User", message, ...extra }));
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The body as text, or undefined when it exceeds `limitBytes` (the rest is drained). */
async function readBody(req: IncomingMessage, limitBytes: number): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= limitBytes) chunks.push(chunk);
  }
  return size > limitBytes ? undefined : Buffer.concat(chunks).toString("utf8");
}

function isJsonOrEmpty(text: string): boolean {
  if (text.trim() === "") return true;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
