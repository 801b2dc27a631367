/** The scheduler's Invoke retry decision (shared/scheduler/invoke-backoff.ts): pure, on an injected clock and random. */
import { ResourceNotFoundException, ServiceException, TooManyRequestsException } from "@aws-sdk/client-lambda";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { classifyInvokeError, InvokeBackoff } from "../shared/scheduler/invoke-backoff.ts";

const meta = (httpStatusCode: number) => ({ $metadata: { httpStatusCode } });
const throttle = (Reason?: string, retryAfterSeconds?: string) =>
  new TooManyRequestsException({ ...meta(429), message: "Rate Exceeded.", Reason: Reason as never, retryAfterSeconds });

describe("classifyInvokeError", () => {
  it("reads a throttle's Retry-After and whose limit it hit", () => {
    expect(classifyInvokeError(throttle("ConcurrentInvocationLimitExceeded", "3"))).toEqual({
      kind: "throttled", retryAfterMs: 3_000, accountWide: true, reason: "ConcurrentInvocationLimitExceeded",
    });
    expect(classifyInvokeError(throttle("ReservedFunctionConcurrentInvocationLimitExceeded"))).toMatchObject({
      kind: "throttled", retryAfterMs: undefined, accountWide: false,
    });
    // No reason given: taken as the account's, so no more runners are asked for.
    expect(classifyInvokeError(throttle(undefined, "not a number"))).toMatchObject({ accountWide: true, retryAfterMs: undefined });
  });

  it("tells a missing function, a refusal for good and a failure worth retrying apart", () => {
    expect(classifyInvokeError(new ResourceNotFoundException({ ...meta(404), message: "Function not found" }))).toEqual({ kind: "missing" });
    const denied = Object.assign(new Error("not authorized"), { name: "AccessDeniedException", $fault: "client", ...meta(403) });
    expect(classifyInvokeError(denied)).toEqual({ kind: "rejected", name: "AccessDeniedException" });
    const updating = Object.assign(new Error("update in progress"), { name: "ResourceConflictException", $fault: "client", ...meta(409) });
    expect(classifyInvokeError(updating).kind).toBe("transient");
    expect(classifyInvokeError(new ServiceException({ ...meta(500), message: "boom" })).kind).toBe("transient");
    expect(classifyInvokeError(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }))).toEqual({ kind: "transient", name: "Error" });
    expect(classifyInvokeError(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED", name: undefined }))).toEqual({ kind: "transient", name: "ECONNREFUSED" });
    expect(classifyInvokeError(new DOMException("aborted", "AbortError")).kind).toBe("transient");
    expect(classifyInvokeError("not an error").kind).toBe("transient");
  });
});

describe("InvokeBackoff", () => {
  const make = (random = () => 0.5) => {
    let now = 1_000_000;
    const backoff = new InvokeBackoff({ baseMs: 1_000, maxMs: 60_000, now: () => now, random });
    return { backoff, advance: (ms: number) => void (now += ms), now: () => now };
  };

  it("doubles the delay with each failure in a row, jittered, up to the cap; an accepted Invoke clears it", () => {
    const { backoff, advance } = make(() => 1);
    const delays = Array.from({ length: 9 }, () => {
      const d = backoff.failed("runner", { kind: "transient", name: "Error" });
      expect(backoff.may("runner")).toBe(false);
      advance(d);
      expect(backoff.may("runner")).toBe(true);
      return d;
    });
    expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]);
    backoff.succeeded("runner");
    expect(backoff.failures("runner")).toBe(0);
    expect(backoff.failed("runner", { kind: "transient", name: "Error" })).toBe(1_000);
  });

  it("jitters within half the delay and never below it: property over random draws", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 20 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (n, r) => {
      const { backoff } = make(() => r);
      let d = 0;
      for (let i = 0; i < n; i++) d = backoff.failed("f", { kind: "transient", name: "Error" });
      const full = Math.min(60_000, 1_000 * 2 ** (n - 1));
      return d >= full / 2 && d <= full;
    }));
  });

  it("waits at least what Retry-After says, even on the first throttle", () => {
    const { backoff, now } = make();
    expect(backoff.failed("runner", { kind: "throttled", retryAfterMs: 10_000, accountWide: false })).toBe(10_000);
    expect(backoff.retryAtMs("runner")).toBe(now() + 10_000);
  });

  it("an account-wide throttle holds back every function; a function's own holds back only it", () => {
    const { backoff, advance } = make();
    backoff.failed("runner", { kind: "throttled", accountWide: false });
    expect([backoff.may("runner"), backoff.may("other")]).toEqual([false, true]);
    const d = backoff.failed("runner", { kind: "throttled", accountWide: true });
    expect([backoff.may("runner"), backoff.may("other"), backoff.may("scheduler")]).toEqual([false, false, false]);
    advance(d);
    expect([backoff.may("runner"), backoff.may("other")]).toEqual([true, true]);
  });

  it("asks a missing function again only once per cap, from the first failure", () => {
    const { backoff, advance } = make();
    expect(backoff.failed("gone", { kind: "missing" })).toBe(60_000);
    advance(59_999);
    expect(backoff.may("gone")).toBe(false);
    advance(1);
    expect(backoff.may("gone")).toBe(true);
    expect(backoff.failed("gone", { kind: "rejected", name: "AccessDeniedException" })).toBe(60_000);
  });
});
