import { retryDelayMs } from "../lifecycle/backoff.ts";

/**
 * When the scheduler may ask Lambda for an Invoke again after one failed:
 * a pure decision on an injected clock and random, kept per function across
 * passes (and across invocations of a warm scheduler).
 *
 * - Throttled (`TooManyRequestsException`): exponential backoff with equal
 *   jitter from `baseMs` to `maxMs`, and never sooner than the Retry-After
 *   Lambda sent. A throttle whose `Reason` is the account's (concurrency or
 *   request rate of the whole account, or none given) holds back every
 *   function, so no more runners are asked for while it lasts; a function's
 *   own (reserved concurrency, its rate) holds back that function.
 * - Missing (`ResourceNotFoundException`) or refused for good (another
 *   client error: permissions, a bad request): cannot succeed until someone
 *   deploys or fixes it, so asked again only every `maxMs`, enough for the
 *   failure to be seen in every alarm period, no more.
 * - Anything else (connection reset or refused, no answer, a 5xx, a function
 *   being updated): backoff as for a throttle, without a hint.
 *
 * An accepted Invoke clears the function's backoff.
 */

export type InvokeFailure =
  | { kind: "throttled"; retryAfterMs?: number; accountWide: boolean; reason?: string }
  | { kind: "missing" }
  | { kind: "rejected"; name: string }
  | { kind: "transient"; name: string };

/** Throttle reasons that are the function's own; any other (or none) is the account's. */
const FUNCTION_THROTTLES = new Set([
  "ReservedFunctionConcurrentInvocationLimitExceeded",
  "ReservedFunctionInvocationRateLimitExceeded",
  "FunctionInvocationRateLimitExceeded",
]);
/** Client errors (4xx) that a later try can get past: the function is being updated. */
const RETRYABLE_CLIENT_ERRORS = new Set(["ResourceConflictException", "ResourceNotReadyException"]);
/** Longest Retry-After honoured (a larger one is read as this). */
const MAX_RETRY_AFTER_MS = 15 * 60_000;

interface SdkLikeError {
  name?: string;
  code?: string;
  $fault?: "client" | "server";
  $metadata?: { httpStatusCode?: number };
  $response?: { headers?: Record<string, string | undefined> };
  retryAfterSeconds?: string;
  Reason?: string;
}

/** What a failed Invoke's error says about retrying it. */
export function classifyInvokeError(err: unknown): InvokeFailure {
  const e = (typeof err === "object" && err !== null ? err : {}) as SdkLikeError;
  const name = e.name ?? e.code ?? "Error";
  const status = e.$metadata?.httpStatusCode;
  if (name === "TooManyRequestsException" || status === 429) {
    const retryAfter = Number(e.retryAfterSeconds ?? e.$response?.headers?.["retry-after"]);
    return {
      kind: "throttled",
      retryAfterMs: Number.isFinite(retryAfter) && retryAfter > 0 ? Math.min(retryAfter * 1000, MAX_RETRY_AFTER_MS) : undefined,
      accountWide: !FUNCTION_THROTTLES.has(e.Reason ?? ""),
      reason: e.Reason,
    };
  }
  if (name === "ResourceNotFoundException") return { kind: "missing" };
  const clientError = e.$fault === "client" && status !== undefined && status >= 400 && status < 500;
  if (clientError && !RETRYABLE_CLIENT_ERRORS.has(name)) return { kind: "rejected", name };
  return { kind: "transient", name };
}

export interface InvokeBackoffOptions {
  /** First delay after a failure (before jitter). */
  baseMs: number;
  /** Longest delay; also how often a missing function is asked again. */
  maxMs: number;
  now: () => number;
  random: () => number;
}

interface Health {
  failures: number;
  notBeforeMs: number;
}

export class InvokeBackoff {
  private readonly fns = new Map<string, Health>();
  private accountNotBeforeMs = 0;

  constructor(private readonly o: InvokeBackoffOptions) {}

  /** When `fn` may be invoked again (now or earlier: at once). */
  retryAtMs(fn: string): number {
    return Math.max(this.fns.get(fn)?.notBeforeMs ?? 0, this.accountNotBeforeMs);
  }

  /** Whether `fn` may be invoked now. */
  may(fn: string): boolean {
    return this.retryAtMs(fn) <= this.o.now();
  }

  /** Failures in a row of `fn` (0 after an accepted Invoke). */
  failures(fn: string): number {
    return this.fns.get(fn)?.failures ?? 0;
  }

  succeeded(fn: string): void {
    this.fns.delete(fn);
  }

  /** Records a failed Invoke of `fn`; returns the delay before it may be tried again. */
  failed(fn: string, failure: InvokeFailure): number {
    const failures = this.failures(fn) + 1;
    const delayMs = this.delayMs(failures, failure);
    const notBeforeMs = this.o.now() + delayMs;
    this.fns.set(fn, { failures, notBeforeMs });
    if (failure.kind === "throttled" && failure.accountWide) this.accountNotBeforeMs = Math.max(this.accountNotBeforeMs, notBeforeMs);
    return delayMs;
  }

  private delayMs(failures: number, failure: InvokeFailure): number {
    if (failure.kind === "missing" || failure.kind === "rejected") return this.o.maxMs;
    const backoffMs = retryDelayMs(failures, this.o.baseMs, this.o.random, this.o.maxMs);
    return failure.kind === "throttled" ? Math.max(backoffMs, failure.retryAfterMs ?? 0) : backoffMs;
  }
}
