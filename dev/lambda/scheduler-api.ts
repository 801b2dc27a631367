/**
 * The HTTP face of the local EventBridge Scheduler: the REST-JSON operations
 * `@aws-sdk/client-scheduler` sends (CreateSchedule, GetSchedule,
 * DeleteSchedule, ListSchedules), answered with the status codes and
 * `x-amzn-ErrorType` errors the SDK turns into ConflictException,
 * ResourceNotFoundException and ValidationException.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { LOCAL_ACCOUNT_ID, LOCAL_REGION } from "./lambda-env.ts";
import { validateDefinition, type ScheduleDefinition, type Schedules } from "./eventbridge.ts";

const SCHEDULE_PATH = /^\/schedules\/([^/]+)\/?$/;

export function isSchedulerPath(pathname: string): boolean {
  return pathname === "/schedules" || pathname.startsWith("/schedules/");
}

function arn(def: { Name: string; GroupName?: string }): string {
  return `arn:aws:scheduler:${LOCAL_REGION}:${LOCAL_ACCOUNT_ID}:schedule/${def.GroupName ?? "default"}/${def.Name}`;
}

function send(res: ServerResponse, status: number, body: unknown, errorType?: string): void {
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  if (errorType) headers["x-amzn-ErrorType"] = errorType;
  res.writeHead(status, headers);
  res.end(JSON.stringify(body));
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString("utf8");
  return text.trim() ? (JSON.parse(text) as Record<string, unknown>) : {};
}

export async function handleSchedulerApi(schedules: Schedules, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://localhost");
  const group = url.searchParams.get("groupName") ?? undefined;
  if (req.method === "GET" && url.pathname.replace(/\/$/, "") === "/schedules") {
    req.resume();
    const list = schedules.list().map((d) => ({ Name: d.Name, GroupName: d.GroupName ?? "default", Arn: arn(d), State: d.State }));
    return send(res, 200, { Schedules: list });
  }
  const name = decodeURIComponent(SCHEDULE_PATH.exec(url.pathname)?.[1] ?? "");
  if (!name) {
    req.resume();
    return send(res, 404, { Message: `Unknown operation ${req.method} ${url.pathname}` }, "UnknownOperationException");
  }
  const notFound = () => send(res, 404, { Message: `Schedule ${name} does not exist.` }, "ResourceNotFoundException");
  if (req.method === "POST") {
    const def = { ...(await readJson(req)), Name: name } as unknown as ScheduleDefinition;
    const problem = validateDefinition(def);
    if (problem) return send(res, 400, { Message: problem }, "ValidationException");
    if (schedules.create(def) === "conflict") return send(res, 409, { Message: `Schedule ${name} already exists.` }, "ConflictException");
    return send(res, 200, { ScheduleArn: arn(def) });
  }
  req.resume();
  if (req.method === "GET") {
    const def = schedules.get(name, group);
    return def ? send(res, 200, { ...def, GroupName: def.GroupName ?? "default", Arn: arn(def) }) : notFound();
  }
  if (req.method === "DELETE") return schedules.delete(name, group) ? send(res, 200, {}) : notFound();
  return send(res, 404, { Message: `Unknown operation ${req.method} ${url.pathname}` }, "UnknownOperationException");
}
