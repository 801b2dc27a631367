import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { registry as appRegistry } from "../jobs/index.ts";
import { defineConfig } from "../shared/settings/config.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { servingRules } from "../shared/settings/serving.ts";
import { createApp, type App } from "../functions/api/app.ts";
import { generateToken } from "../functions/api/auth.ts";
import { createTestDb, type TestDb } from "./support/db.ts";

const token = generateToken();
/** The app's job types, plus one whose schema lets any JSON through, and one with a lease no runner here holds. */
const registry = createRegistry([
  ...appRegistry.values(),
  defineJob({ name: "blob.store", schema: z.object({ data: z.unknown() }), handler: () => {} }),
  defineJob({ name: "report.long", schema: z.object({}), leaseMs: 120_000, handler: () => {} }),
  // Made by hand, past defineJob: its lease is under MIN_LEASE_MS, and enqueue refuses it.
  { ...defineJob({ name: "report.brief", schema: z.object({}), handler: () => {} }), leaseMs: 500 },
]);
/** Runners as the deployment declares them: "default" and "cpu" only, leases up to 60 s. */
const serving = servingRules(defineConfig({
  runners: {
    runner: { queues: ["default"], timeoutSeconds: 300, maxLeaseMs: 60_000 },
    "runner-cpu": { queues: ["cpu"], timeoutSeconds: 300, maxLeaseMs: 60_000 },
  },
}));
const nested = (depth: number) => JSON.parse("[".repeat(depth) + "]".repeat(depth)) as unknown;
const welcome = (payload: unknown = { to: "ada@example.com", name: "Ada" }, extra: object = {}) =>
  ({ name: "email.welcome", payload, ...extra });

interface BadInput {
  what: string;
  method?: string;
  path: string;
  /** JSON-encoded unless a string. */
  body?: unknown;
  headers?: Record<string, string>;
  status: number;
  code: string;
  /** The message must name this (the field, or the problem). */
  names: string;
  /** The path of the first issue, when there are issues. */
  issue?: (string | number)[];
}

const big = "x".repeat(1024 * 1024);

const badInputs: BadInput[] = [
  { what: "an unknown job type", path: "/v1/jobs", body: { name: "nope", payload: {} }, status: 400, code: "unknown_job_type", names: "name", issue: ["name"] },
  { what: "a payload its job's schema refuses", path: "/v1/jobs", body: welcome({ to: "not-an-email", name: "Ada" }), status: 400, code: "invalid_payload", names: "payload.to", issue: ["payload", "to"] },
  { what: "a missing payload", path: "/v1/jobs", body: { name: "email.welcome" }, status: 400, code: "invalid_payload", names: "payload", issue: ["payload"] },
  { what: "a payload with a NUL character", path: "/v1/jobs", body: welcome({ to: "ada@example.com", name: "A\u0000da" }), status: 400, code: "invalid_payload", names: "payload.name", issue: ["payload", "name"] },
  { what: "a payload with a lone surrogate", path: "/v1/jobs", body: `{"name":"email.welcome","payload":{"to":"ada@example.com","name":"A\\ud800da"}}`, status: 400, code: "invalid_payload", names: "payload.name", issue: ["payload", "name"] },
  { what: "a dedupe key with a lone surrogate", path: "/v1/jobs", body: `{"name":"email.welcome","payload":{"to":"ada@example.com","name":"Ada"},"dedupeKey":"k\\udc00"}`, status: 400, code: "invalid_request", names: "dedupeKey", issue: ["dedupeKey"] },
  { what: "a queue no runner serves", path: "/v1/jobs", body: welcome(undefined, { queue: "nowhere" }), status: 400, code: "invalid_payload", names: "no runner serves queue", issue: ["queue"] },
  { what: "a job whose lease is under the minimum", path: "/v1/jobs", body: { name: "report.brief", payload: {} }, status: 400, code: "invalid_payload", names: "at least 1000ms (MIN_LEASE_MS)", issue: ["type", "leaseMs"] },
  { what: "a batch with a job whose lease its runner cannot hold", path: "/v1/jobs/batch", body: { jobs: [welcome(), { name: "report.long", payload: {} }] }, status: 400, code: "invalid_payload", names: "maxLeaseMs", issue: ["jobs", 1, "queue"] },
  { what: "a payload nested too deeply", path: "/v1/jobs", body: { name: "blob.store", payload: { data: nested(64) } }, status: 400, code: "invalid_payload", names: "payload: nested deeper than 64", issue: ["payload"] },
  { what: "a payload too deep to serialize", path: "/v1/jobs", body: `{"name":"blob.store","payload":{"data":${"[".repeat(200_000)}${"]".repeat(200_000)}}}`, status: 400, code: "invalid_payload", names: "nested deeper", issue: ["payload"] },
  { what: "a batch with a payload nested too deeply", path: "/v1/jobs/batch", body: { jobs: [welcome(), { name: "blob.store", payload: { data: nested(100) } }] }, status: 400, code: "invalid_payload", names: "jobs.1.payload", issue: ["jobs", 1, "payload"] },
  { what: "a missing name", path: "/v1/jobs", body: { payload: {} }, status: 400, code: "invalid_request", names: "name", issue: ["name"] },
  { what: "a name that is not a string", path: "/v1/jobs", body: { name: 7, payload: {} }, status: 400, code: "invalid_request", names: "name", issue: ["name"] },
  { what: "an unknown field", path: "/v1/jobs", body: welcome(undefined, { delay: 5 }), status: 400, code: "invalid_request", names: "delay" },
  { what: "a runAt that is not a date", path: "/v1/jobs", body: welcome(undefined, { runAt: "tomorrow" }), status: 400, code: "invalid_request", names: "runAt", issue: ["runAt"] },
  { what: "both runAt and delaySeconds", path: "/v1/jobs", body: welcome(undefined, { runAt: new Date().toISOString(), delaySeconds: 5 }), status: 400, code: "invalid_request", names: "delaySeconds", issue: ["delaySeconds"] },
  { what: "a negative delaySeconds", path: "/v1/jobs", body: welcome(undefined, { delaySeconds: -1 }), status: 400, code: "invalid_request", names: "delaySeconds", issue: ["delaySeconds"] },
  { what: "a priority out of range", path: "/v1/jobs", body: welcome(undefined, { priority: 40_000 }), status: 400, code: "invalid_request", names: "priority", issue: ["priority"] },
  { what: "a fractional priority", path: "/v1/jobs", body: welcome(undefined, { priority: 1.5 }), status: 400, code: "invalid_request", names: "priority", issue: ["priority"] },
  { what: "zero maxAttempts", path: "/v1/jobs", body: welcome(undefined, { maxAttempts: 0 }), status: 400, code: "invalid_request", names: "maxAttempts", issue: ["maxAttempts"] },
  { what: "an empty queue", path: "/v1/jobs", body: welcome(undefined, { queue: "" }), status: 400, code: "invalid_request", names: "queue", issue: ["queue"] },
  { what: "a queue with a NUL character", path: "/v1/jobs", body: welcome(undefined, { queue: "a\u0000b" }), status: 400, code: "invalid_request", names: "queue", issue: ["queue"] },
  { what: "a dedupe key too long", path: "/v1/jobs", body: welcome(undefined, { dedupeKey: "k".repeat(600) }), status: 400, code: "invalid_request", names: "dedupeKey", issue: ["dedupeKey"] },
  { what: "a debounce without a key", path: "/v1/jobs", body: welcome(undefined, { debounce: { periodMs: 1_000 } }), status: 400, code: "invalid_request", names: "debounce.key", issue: ["debounce", "key"] },
  { what: "a debounce whose maxWaitMs is shorter than its period", path: "/v1/jobs", body: welcome(undefined, { debounce: { key: "k", periodMs: 5_000, maxWaitMs: 1_000 } }), status: 400, code: "invalid_request", names: "debounce.maxWaitMs", issue: ["debounce", "maxWaitMs"] },
  { what: "a debounce with delaySeconds", path: "/v1/jobs", body: welcome(undefined, { debounce: { key: "k", periodMs: 5_000 }, delaySeconds: 5 }), status: 400, code: "invalid_request", names: "delaySeconds", issue: ["delaySeconds"] },
  { what: "a debounce with a dedupe key", path: "/v1/jobs", body: welcome(undefined, { debounce: { key: "k", periodMs: 5_000 }, dedupeKey: "k" }), status: 400, code: "invalid_request", names: "dedupeKey", issue: ["dedupeKey"] },
  { what: "a rate limit key for a type that declares no rate limit", path: "/v1/jobs", body: welcome(undefined, { rateLimit: { key: "partner" } }), status: 400, code: "invalid_payload", names: "rateLimit", issue: ["rateLimit"] },
  { what: "a rate limit of 0", path: "/v1/jobs", body: welcome(undefined, { rateLimit: { key: "partner", limit: 0 } }), status: 400, code: "invalid_request", names: "rateLimit.limit", issue: ["rateLimit", "limit"] },
  { what: "both debounce and throttle", path: "/v1/jobs", body: welcome(undefined, { debounce: { key: "k", periodMs: 5_000 }, throttle: { key: "k", periodMs: 5_000 } }), status: 400, code: "invalid_request", names: "throttle", issue: ["throttle"] },
  { what: "a throttle period of zero", path: "/v1/jobs", body: welcome(undefined, { throttle: { key: "k", periodMs: 0 } }), status: 400, code: "invalid_request", names: "throttle.periodMs", issue: ["throttle", "periodMs"] },
  { what: "a throttle period in seconds by mistake", path: "/v1/jobs", body: welcome(undefined, { throttle: { key: "k", periodSeconds: 5 } }), status: 400, code: "invalid_request", names: "periodSeconds" },
  { what: "a batch with a bad debounce", path: "/v1/jobs/batch", body: { jobs: [welcome(), welcome(undefined, { debounce: { key: "k", periodMs: 1.5 } })] }, status: 400, code: "invalid_request", names: "jobs.1.debounce.periodMs", issue: ["jobs", 1, "debounce", "periodMs"] },
  { what: "malformed JSON", path: "/v1/jobs", body: '{"name": "email.welcome", ', status: 400, code: "malformed_json", names: "JSON" },
  { what: "an empty JSON body", path: "/v1/jobs", body: "", status: 400, code: "malformed_json", names: "JSON" },
  { what: "a body that is an array", path: "/v1/jobs", body: [welcome()], status: 400, code: "invalid_request", names: "object" },
  { what: "a body that is not JSON", path: "/v1/jobs", body: "name=email.welcome", headers: { "content-type": "text/plain" }, status: 415, code: "unsupported_media_type", names: "application/json" },
  { what: "an oversized body", path: "/v1/jobs", body: welcome({ to: "ada@example.com", name: big }), status: 413, code: "payload_too_large", names: "larger than" },
  { what: "a batch with one bad payload", path: "/v1/jobs/batch", body: { jobs: [welcome(), welcome({ to: "x", name: "B" }), welcome()] }, status: 400, code: "invalid_payload", names: "jobs.1.payload.to", issue: ["jobs", 1, "payload", "to"] },
  { what: "a batch of one bad payload", path: "/v1/jobs/batch", body: { jobs: [welcome({ to: "x", name: "B" })] }, status: 400, code: "invalid_payload", names: "jobs.0.payload.to", issue: ["jobs", 0, "payload", "to"] },
  { what: "a batch with an unknown job type", path: "/v1/jobs/batch", body: { jobs: [welcome(), welcome(), { name: "nope", payload: {} }] }, status: 400, code: "unknown_job_type", names: "jobs.2.name", issue: ["jobs", 2, "name"] },
  { what: "a batch with a bad option", path: "/v1/jobs/batch", body: { jobs: [welcome(), welcome(undefined, { priority: "high" })] }, status: 400, code: "invalid_request", names: "jobs.1.priority", issue: ["jobs", 1, "priority"] },
  { what: "a batch repeating a dedupe key", path: "/v1/jobs/batch", body: { jobs: [welcome(undefined, { dedupeKey: "k" }), welcome(undefined, { dedupeKey: "k" })] }, status: 400, code: "invalid_payload", names: "dedupe key", issue: ["jobs", 1, "dedupeKey"] },
  { what: "an empty batch", path: "/v1/jobs/batch", body: { jobs: [] }, status: 400, code: "invalid_request", names: "jobs", issue: ["jobs"] },
  { what: "a word for an id", method: "GET", path: "/v1/jobs/abc", status: 400, code: "invalid_request", names: "id", issue: ["id"] },
  { what: "a zero id", method: "GET", path: "/v1/jobs/0", status: 400, code: "invalid_request", names: "id", issue: ["id"] },
  { what: "a negative id", method: "GET", path: "/v1/jobs/-1", status: 400, code: "invalid_request", names: "id", issue: ["id"] },
  { what: "an id past bigint", method: "GET", path: "/v1/jobs/9223372036854775808", status: 400, code: "invalid_request", names: "id", issue: ["id"] },
  { what: "an id in exponent form", path: "/v1/jobs/1e3/retry", status: 400, code: "invalid_request", names: "id", issue: ["id"] },
  { what: "a word for an id to cancel", path: "/v1/jobs/x/cancel", status: 400, code: "invalid_request", names: "id", issue: ["id"] },
  { what: "a job that does not exist", method: "GET", path: "/v1/jobs/9223372036854775807", status: 404, code: "not_found", names: "9223372036854775807" },
  { what: "a retry of a job that does not exist", path: "/v1/jobs/987654321/retry", status: 404, code: "not_found", names: "987654321" },
  { what: "a cancel of a job that does not exist", path: "/v1/jobs/987654321/cancel", status: 404, code: "not_found", names: "987654321" },
  { what: "an unknown status filter", method: "GET", path: "/v1/jobs?status=zombie", status: 400, code: "invalid_request", names: "status", issue: ["status"] },
  { what: "a zero limit", method: "GET", path: "/v1/jobs?limit=0", status: 400, code: "invalid_request", names: "limit", issue: ["limit"] },
  { what: "a limit that is not a number", method: "GET", path: "/v1/jobs?limit=ten", status: 400, code: "invalid_request", names: "limit", issue: ["limit"] },
  { what: "a limit over 500", method: "GET", path: "/v1/jobs?limit=501", status: 400, code: "invalid_request", names: "limit", issue: ["limit"] },
  { what: "a bad cursor", method: "GET", path: "/v1/jobs?cursor=abc", status: 400, code: "invalid_request", names: "cursor", issue: ["cursor"] },
  { what: "a queue filter with a NUL character", method: "GET", path: "/v1/jobs?queue=%00", status: 400, code: "invalid_request", names: "queue", issue: ["queue"] },
  { what: "a misspelt filter", method: "GET", path: "/v1/jobs?stauts=dead", status: 400, code: "invalid_request", names: "stauts" },
  { what: "a route that does not exist", method: "GET", path: "/v1/nothing", status: 404, code: "not_found", names: "/v1/nothing" },
  { what: "a method a route does not have", method: "DELETE", path: "/v1/jobs/1", status: 404, code: "not_found", names: "DELETE" },
];

describe("HTTP API: every bad input gets its 4xx and writes nothing", () => {
  let t: TestDb;
  let app: App;
  const logs: string[] = [];
  beforeAll(async () => {
    t = await createTestDb("pg");
    const logger = { info: (m: string, a: object) => logs.push(JSON.stringify([m, a])), error: (m: string, a: object) => logs.push(JSON.stringify([m, a])) };
    app = createApp({ store: t, registry, token, logger, serving });
    // Something to leave untouched.
    const res = await app.request("/v1/jobs/batch", {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ jobs: [welcome(), welcome(undefined, { dedupeKey: "k" })] }),
    });
    expect(res.status).toBe(201);
  });
  afterAll(() => t.drop());

  const snapshot = async () =>
    (await t.admin.query(`select id, status, attempts, run_at, payload from "${t.schema}".jobs order by id`)).rows;

  it.each(badInputs)("$what: $status $code", async ({ method = "POST", path, body, headers, status, code, names, issue }) => {
    const before = await snapshot();
    const res = await app.request(path, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const json = (await res.json()) as { error: { code: string; message: string; issues?: { path: unknown[] }[] } };
    expect({ status: res.status, code: json.error.code }).toEqual({ status, code });
    expect(json.error.message).toContain(names);
    if (issue) expect(json.error.issues?.[0]?.path).toEqual(issue);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await snapshot()).toEqual(before);
  });

  it("accepts a payload nested exactly to the limit", async () => {
    const res = await app.request("/v1/jobs", {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "blob.store", payload: { data: nested(63) } }),
    });
    expect(res.status).toBe(201);
  });

  it("logs no request body or token, and no server fault for any of them", () => {
    const all = logs.join("\n");
    expect(all).not.toContain(token);
    expect(all).not.toContain("ada@example.com");
    expect(all).not.toContain("request failed");
    expect(logs.length).toBeGreaterThanOrEqual(badInputs.length);
  });
});
