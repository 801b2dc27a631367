/**
 * Every error the API sends has one shape, `{ error: { code, message, issues? } }`.
 * Client mistakes are 4xx and name what was wrong; 500 is for server faults
 * only, and its body says nothing about the request or the server.
 */
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ZodError } from "zod";
import { UnknownJobTypeError, ValidationError } from "../../shared/errors.ts";
import type { JobStatus } from "../../shared/jobs/job.ts";
import type { ErrorJson } from "./schemas.ts";

export type Issue = { path: (string | number)[]; message: string };

export class ApiError extends Error {
  override name = "ApiError";
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly details: { issues?: Issue[]; status?: JobStatus } = {},
  ) {
    super(message);
  }
}

export const errorJson = (code: string, message: string, details: ApiError["details"] = {}): ErrorJson => ({
  error: { code, message, ...details },
});

function describe(issues: Issue[]): string {
  return issues.map((i) => (i.path.length ? `${i.path.join(".")}: ${i.message}` : i.message)).join("; ");
}

/** A request that failed its zod schema: 400, every issue with its path. */
export function invalidRequest(error: ZodError): ApiError {
  const issues = error.issues.map((i) => ({ path: i.path.map((p) => (typeof p === "symbol" ? String(p) : p)), message: i.message }));
  return new ApiError(400, "invalid_request", describe(issues), { issues });
}

export const unknownJobType = (name: string, path: (string | number)[]) =>
  new ApiError(400, "unknown_job_type", `${path.join(".")}: unknown job type ${JSON.stringify(name)}`, {
    issues: [{ path, message: `unknown job type ${JSON.stringify(name)}` }],
  });

/**
 * A last line of defence: a payload Postgres refused anyway (SQLSTATE class
 * 22; 54001, nested too deeply) or too deep to serialize. The core's
 * validation (shared/jobs/validate.ts) refuses all of these before any write, with
 * the path of the bad value; should one slip through, it is still the
 * client's mistake: 400.
 */
export function refusedPayload(err: unknown, path: (string | number)[]): ApiError | null {
  const code = (err as { code?: unknown } | null)?.code;
  const refused = typeof code === "string" && (code.startsWith("22") || code === "54001");
  if (!(err instanceof RangeError) && !(err instanceof Error && refused)) return null;
  const reason = err instanceof RangeError ? "it is nested too deeply" : err.message;
  return new ApiError(400, "invalid_payload", `the payload cannot be stored: ${reason}`, { issues: [{ path, message: reason }] });
}

const HTTP_CODES: Record<number, [code: string, message: string]> = {
  400: ["malformed_json", "the request body is not valid JSON"],
  401: ["unauthorized", "missing or wrong bearer token"],
  404: ["not_found", "no such route"],
  413: ["payload_too_large", "the request body is too large"],
  415: ["unsupported_media_type", "send the body as application/json"],
};

/** Turns anything a route threw into its response; `fault` hears about real server faults. */
export function toErrorResponse(err: unknown, c: Context, fault: (err: unknown) => void): Response {
  if (err instanceof ApiError) {
    if (err.status === 401) c.header("WWW-Authenticate", 'Bearer realm="leasehold"');
    return c.json(errorJson(err.code, err.message, err.details), err.status);
  }
  if (err instanceof ValidationError) {
    // Rebuilt from the issues: the core's message leaves out a batch's `jobs.<i>`.
    return c.json(errorJson("invalid_payload", describe(err.issues), { issues: err.issues }), 400);
  }
  if (err instanceof UnknownJobTypeError) {
    return c.json(errorJson("unknown_job_type", err.message, { issues: [{ path: ["name"], message: err.message }] }), 400);
  }
  if (err instanceof HTTPException && err.status < 500) {
    const [code, message] = HTTP_CODES[err.status] ?? ["bad_request", err.message || "bad request"];
    return c.json(errorJson(code, message), err.status as ContentfulStatusCode);
  }
  fault(err);
  return c.json(errorJson("internal_error", "internal server error"), 500);
}
