import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registry } from "../jobs/index.ts";
import { createApp, type App } from "../functions/api/app.ts";
import { generateToken } from "../functions/api/auth.ts";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { failJobs, settleJobs } from "../shared/lifecycle/settle.ts";
import { enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { defineJob } from "../shared/jobs/job.ts";
import * as z from "zod";
import { createPool, createTestDb, drivers, type TestDb } from "./support/db.ts";

const token = generateToken();
const welcome = (extra: object = {}, to = "ada@example.com") => ({ name: "email.welcome", payload: { to, name: "Ada" }, ...extra });

function client(app: App) {
  return async (method: string, path: string, body?: unknown, auth = `Bearer ${token}`) => {
    const res = await app.request(path, {
      method,
      headers: { authorization: auth, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any, headers: res.headers };
  };
}

describe.each(drivers)("HTTP API, happy paths (%s driver)", (driver) => {
  let t: TestDb;
  let call: ReturnType<typeof client>;
  let wakes = 0;
  const logs: string[] = [];
  beforeAll(async () => {
    t = await createTestDb(driver);
    const logger = { info: (m: string, a: object) => logs.push(JSON.stringify([m, a])), error: (m: string, a: object) => logs.push(JSON.stringify([m, a])) };
    const waker = { wake: () => void wakes++, settled: async () => {} };
    // Like the Lambda: a pool opened for each request and closed after it.
    const openStore = () => {
      const pool = createPool(driver, 2);
      return { store: { db: pool, schema: t.schema }, close: () => pool.end() };
    };
    call = client(createApp({ openStore, registry, token, waker, logger }));
  });
  afterAll(() => t.drop());

  const row = async (id: string) => (await t.admin.query(`select * from "${t.schema}".jobs where id = $1`, [id])).rows[0];

  it("enqueues a job with its type's defaults: 201, the job, a wake-up", async () => {
    const before = wakes;
    const { status, body } = await call("POST", "/v1/jobs", welcome());
    expect(status).toBe(201);
    expect(body).toMatchObject({ name: "email.welcome", queue: "default", status: "queued", attempts: 0, maxAttempts: 3, payload: { to: "ada@example.com", name: "Ada" } });
    expect(body.id).toMatch(/^[0-9]+$/);
    expect(new Date(body.runAt).toISOString()).toBe(body.runAt);
    expect(await row(body.id)).toMatchObject({ name: "email.welcome", status: "queued" });
    expect(wakes).toBe(before + 1);
  });

  it("takes queue, priority, attempts, group, delaySeconds and runAt", async () => {
    const a = await call("POST", "/v1/jobs", welcome({ queue: "mail", priority: 7, maxAttempts: 9, group: "tenant-1", delaySeconds: 60 }));
    expect(a.status).toBe(201);
    expect(a.body).toMatchObject({ queue: "mail", priority: 7, maxAttempts: 9, group: "tenant-1" });
    const delay = new Date(a.body.runAt).getTime() - Date.now();
    expect(delay).toBeGreaterThan(50_000);
    expect(delay).toBeLessThanOrEqual(60_000);
    const runAt = "2031-01-02T03:04:05.000Z";
    const b = await call("POST", "/v1/jobs", welcome({ runAt: "2031-01-02T04:04:05+01:00" }));
    expect(b.body.runAt).toBe(runAt);
  });

  it("returns the pending job with the same dedupe key: 200, nothing written", async () => {
    const first = await call("POST", "/v1/jobs", welcome({ dedupeKey: "user-1" }));
    const count = async () => (await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs`)).rows[0]!.n;
    const before = await count();
    const second = await call("POST", "/v1/jobs", welcome({ dedupeKey: "user-1" }));
    expect([first.status, second.status]).toEqual([201, 200]);
    expect(second.body.id).toBe(first.body.id);
    expect(await count()).toBe(before);
  });

  it("debounces by key: 201 then 200 with the same job, now with the last payload and a later start, and only the first wakes", async () => {
    const before = wakes;
    const debounce = { key: `doc-${driver}`, periodMs: 60_000, maxWaitMs: 600_000 };
    const first = await call("POST", "/v1/jobs", welcome({ debounce }, "a@example.com"));
    const second = await call("POST", "/v1/jobs", welcome({ debounce }, "b@example.com"));
    expect([first.status, second.status]).toEqual([201, 200]);
    expect(first.body.debounced).toBeUndefined();
    expect(second.body).toMatchObject({ id: first.body.id, debounced: true, payload: { to: "b@example.com" }, status: "queued" });
    expect(new Date(second.body.runAt).getTime()).toBeGreaterThanOrEqual(new Date(first.body.runAt).getTime());
    expect(wakes).toBe(before + 1);
    expect(await row(first.body.id)).toMatchObject({ debounce_key: `doc-${driver}`, payload: { to: "b@example.com" } });
  });

  it("throttles by key: 200 with the job standing in the window, its first payload kept, and a batch marks what it throttled", async () => {
    const throttle = { key: `user-${driver}`, periodMs: 600_000 };
    const first = await call("POST", "/v1/jobs", welcome({ throttle }, "a@example.com"));
    const second = await call("POST", "/v1/jobs", welcome({ throttle }, "b@example.com"));
    expect([first.status, second.status]).toEqual([201, 200]);
    expect(second.body).toMatchObject({ id: first.body.id, throttled: true, payload: { to: "a@example.com" } });
    const { body } = await call("POST", "/v1/jobs/batch", { jobs: [welcome({ throttle }), welcome({}), welcome({ debounce: { key: `b-${driver}`, periodMs: 1_000 } })] });
    expect(body.jobs).toEqual([
      { id: first.body.id, existing: true, throttled: true },
      { id: expect.any(String), existing: false },
      { id: expect.any(String), existing: false },
    ]);
  });

  it("enqueues a batch in order, marking deduplicated jobs", async () => {
    const pending = await call("POST", "/v1/jobs", welcome({ dedupeKey: "batch-k" }));
    const { status, body } = await call("POST", "/v1/jobs/batch", {
      jobs: [welcome({}, "a@example.com"), welcome({ dedupeKey: "batch-k" }), { name: "report.generate", payload: { reportId: "r1" } }],
    });
    expect(status).toBe(201);
    expect(body.jobs.map((j: { existing: boolean }) => j.existing)).toEqual([false, true, false]);
    expect(body.jobs[1].id).toBe(pending.body.id);
    expect(await row(body.jobs[2].id)).toMatchObject({ name: "report.generate", payload: { reportId: "r1" } });
  });

  it("shows a succeeded job's result, the steps each attempt reached and the steps on record", async () => {
    const { body: job } = await call("POST", "/v1/jobs", { name: "report.generate", payload: { reportId: "r-steps" }, queue: "stepped" });
    const [claimed] = await claimJobs(t, { queue: "stepped", runnerId: "runner-2", limit: 1, maxLeaseMs: 60_000 });
    const log = [{ name: "render", replayed: false, ms: 12.5 }];
    await settleJobs(t, {
      steps: [{ ...claimed!, seq: 0, name: "render", result: JSON.stringify({ pages: 3 }), durationMs: 12.5 }],
      succeeded: [{ ...claimed!, result: JSON.stringify({ url: "s3://r-steps.pdf" }), steps: JSON.stringify(log) }],
    });
    const shown = await call("GET", `/v1/jobs/${job.id}`);
    expect(shown.body).toMatchObject({ id: job.id, status: "succeeded", result: { url: "s3://r-steps.pdf" } });
    expect(shown.body.attemptHistory).toMatchObject([{ run: 1, outcome: "succeeded", steps: log }]);
    expect(shown.body.steps).toMatchObject([{ generation: 1, name: "render", attempt: 1, result: { pages: 3 } }]);
  });

  it("shows a job with its attempts, a dead job in the dead view, retries it and cancels", async () => {
    const { body: job } = await call("POST", "/v1/jobs", welcome({ queue: "ops", maxAttempts: 1 }));
    const [claimed] = await claimJobs(t, { queue: "ops", runnerId: "runner-1", limit: 1, maxLeaseMs: 60_000 });
    await failJobs(t, [{ ...claimed!, outcome: "failed", error: "smtp down", retryDelayMs: 0 }]);

    const shown = await call("GET", `/v1/jobs/${job.id}`);
    expect(shown.status).toBe(200);
    expect(shown.body).toMatchObject({ id: job.id, status: "dead", attempts: 1, lastError: "smtp down" });
    expect(shown.body.attemptHistory).toEqual([
      { run: 1, generation: 1, runnerId: "runner-1", claimedAt: expect.any(String), endedAt: expect.any(String), outcome: "failed", error: "smtp down", steps: null },
    ]);
    const dead = await call("GET", "/v1/jobs?status=dead&queue=ops");
    expect(dead.body.jobs.map((j: { id: string }) => j.id)).toEqual([job.id]);

    const cancelDead = await call("POST", `/v1/jobs/${job.id}/cancel`);
    expect(cancelDead.status).toBe(409);
    expect(cancelDead.body.error).toMatchObject({ code: "conflict", status: "dead" });

    const retried = await call("POST", `/v1/jobs/${job.id}/retry`);
    // The same job, a new generation; its attempt history is kept.
    expect(retried.body).toMatchObject({ id: job.id, status: "queued", attempts: 0, generation: 2 });
    expect((await call("GET", `/v1/jobs/${job.id}`)).body.attemptHistory).toMatchObject([{ run: 1, generation: 1, outcome: "failed" }]);
    const again = await call("POST", `/v1/jobs/${job.id}/retry`);
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: "conflict", status: "queued" });
    expect(again.body.error.message).toContain("only a dead job");

    const cancelled = await call("POST", `/v1/jobs/${job.id}/cancel`);
    expect(cancelled.body).toMatchObject({ status: "cancelled", finishedAt: expect.any(String) });
    const twice = await call("POST", `/v1/jobs/${job.id}/cancel`);
    expect([twice.status, twice.body.error.status]).toEqual([409, "cancelled"]);
  });

  it("refuses to cancel a running job", async () => {
    const { body: job } = await call("POST", "/v1/jobs", welcome({ queue: "busy" }));
    await claimJobs(t, { queue: "busy", runnerId: "r", limit: 1, maxLeaseMs: 60_000 });
    const res = await call("POST", `/v1/jobs/${job.id}/cancel`);
    expect([res.status, res.body.error.status]).toEqual([409, "running"]);
    expect((await row(job.id))!.status).toBe("running");
  });

  it("lists jobs newest first, a page at a time", async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await call("POST", "/v1/jobs", welcome({ queue: "pages" }))).body.id);
    const first = await call("GET", "/v1/jobs?queue=pages&limit=2");
    expect(first.body.jobs.map((j: { id: string }) => j.id)).toEqual([ids[2], ids[1]]);
    const second = await call("GET", `/v1/jobs?queue=pages&limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body).toMatchObject({ jobs: [{ id: ids[0] }], nextCursor: null });
    const byName = await call("GET", "/v1/jobs?name=report.generate&status=queued");
    expect(byName.body.jobs.every((j: { name: string }) => j.name === "report.generate")).toBe(true);
  });

  it("counts per queue", async () => {
    const { status, body } = await call("GET", "/v1/queues");
    expect(status).toBe(200);
    expect(body.queues.find((q: { queue: string }) => q.queue === "pages")).toMatchObject({ ready: 3, running: 0, dead: 0 });
    expect(body.queues.find((q: { queue: string }) => q.queue === "busy")).toMatchObject({ running: 1 });
  });

  it("counts per group: ready, running, and the concurrency limit", async () => {
    const limited = defineJob({ name: "limited", schema: z.object({}), handler: () => {}, queue: "tenants", concurrency: { limit: 2 } });
    await enqueueJobs(t, [job(limited, {}, { group: "t-a" }), job(limited, {}, { group: "t-a" }), job(limited, {}, { group: "t-b" })]);
    await call("POST", "/v1/jobs", welcome({ queue: "tenants" }));
    const { status, body } = await call("GET", "/v1/groups?queue=tenants");
    expect(status).toBe(200);
    expect(body.groups).toEqual([
      { queue: "tenants", group: "t-a", ready: 2, running: 0, limit: 2 },
      { queue: "tenants", group: null, ready: 1, running: 0, limit: null },
      { queue: "tenants", group: "t-b", ready: 1, running: 0, limit: 2 },
    ]);
    expect((await call("GET", "/v1/groups?queue=")).status).toBe(400);
  });

  it("shows per rate limit key what waits on it and when its full window opens", async () => {
    const rated = defineJob({ name: "rated", schema: z.object({}), handler: () => {}, queue: "rated", rateLimit: { limit: 2, periodMs: 60_000, key: "partner-api" } });
    await enqueueJobs(t, [job(rated, {}), job(rated, {}), job(rated, {})]);
    expect((await call("GET", "/v1/groups?queue=rated")).body.rateLimits).toEqual([
      { key: "partner-api", waiting: 3, limit: 2, periodMs: 60_000, startedInWindow: 0, opensAt: null },
    ]);
    const started = await claimJobs(t, { queue: "rated", runnerId: "r", limit: 5, maxLeaseMs: 60_000, rated: true });
    expect(started).toHaveLength(2);
    const { body } = await call("GET", "/v1/groups?queue=rated");
    expect(body.rateLimits).toEqual([
      { key: "partner-api", waiting: 1, limit: 2, periodMs: 60_000, startedInWindow: 2, opensAt: expect.any(String) },
    ]);
    const opensInMs = Date.parse(body.rateLimits[0].opensAt) - Date.now();
    expect(opensInMs).toBeGreaterThan(50_000);
    expect(opensInMs).toBeLessThanOrEqual(60_000);
    expect((await call("GET", "/v1/groups?queue=tenants")).body.rateLimits).toEqual([]);
  });

  it("logs each request without its body or token", () => {
    const all = logs.join("\n");
    expect(all).toContain('"path":"/v1/jobs"');
    expect(all).not.toContain(token);
    expect(all).not.toContain("ada@example.com");
  });
});

describe("HTTP API, auth, documents and faults", () => {
  let t: TestDb;
  let app: App;
  let call: ReturnType<typeof client>;
  beforeAll(async () => {
    t = await createTestDb("pg");
    app = createApp({ store: t, registry, token });
    call = client(app);
  });
  afterAll(() => t.drop());

  it("answers /health with no token and touches no database", async () => {
    const broken = createApp({ store: { db: { query: () => Promise.reject(new Error("down")) }, schema: "x" }, registry, token });
    const res = await client(broken)("GET", "/health", undefined, "");
    expect(res).toMatchObject({ status: 200, body: { ok: true } });
  });

  it("refuses every other route without the right token: 401 JSON", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const routes = Object.entries(doc.paths as Record<string, object>).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => [method.toUpperCase(), path.replace("{id}", "1")] as const),
    ).filter(([, path]) => path !== "/health");
    expect(routes.length).toBeGreaterThanOrEqual(8);
    for (const [method, path] of routes) {
      for (const auth of ["", `Bearer ${token}x`, `Bearer ${token.slice(1)}`, "Bearer", `Basic ${token}`, token]) {
        const res = await call(method, path, method === "POST" ? welcome() : undefined, auth);
        expect([method, path, auth, res.status, res.body.error.code]).toEqual([method, path, auth, 401, "unauthorized"]);
        expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
      }
    }
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs`);
    expect(rows[0]!.n).toBe(0);
  });

  it("serves an OpenAPI document whose paths are exactly the app's routes", async () => {
    const { status, body } = await call("GET", "/openapi.json");
    expect(status).toBe(200);
    expect(body.openapi).toMatch(/^3\./);
    const documented = Object.entries(body.paths as Record<string, object>)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
      .sort();
    const served = [...new Set(app.routes.filter((r) => r.method !== "ALL").map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, "{$1}")}`))].sort();
    // The dashboard's static page, script and stylesheet are the only routes
    // left out: they are not API, need no token and hold no data (test/dashboard.test.ts).
    const undocumented = ["GET /dashboard", "GET /dashboard/app.css", "GET /dashboard/app.js"];
    expect(served).toEqual([...documented, ...undocumented].sort());
    expect(documented).toEqual([
      "GET /health", "GET /openapi.json", "GET /v1/groups", "GET /v1/jobs", "GET /v1/jobs/{id}", "GET /v1/queues", "GET /v1/recurring",
      "GET /v1/throughput",
      "POST /v1/jobs", "POST /v1/jobs/batch", "POST /v1/jobs/{id}/cancel", "POST /v1/jobs/{id}/retry",
    ]);
    expect(body.components.securitySchemes.bearer).toEqual({ type: "http", scheme: "bearer" });
    expect(body.components.schemas.EnqueueRequest.required).toEqual(["name"]);
    expect(body.paths["/v1/jobs"].post.responses).toHaveProperty("201");
  });

  it("answers a server fault with a bare 500 and logs it without the request", async () => {
    const logs: string[] = [];
    const logger = { info: () => {}, error: (m: string, a: object) => logs.push(JSON.stringify([m, a])) };
    const broken = createApp({ store: { db: { query: () => Promise.reject(new Error("connection refused")) }, schema: "x" }, registry, token, logger });
    const res = await client(broken)("POST", "/v1/jobs", welcome());
    expect(res).toMatchObject({ status: 500, body: { error: { code: "internal_error", message: "internal server error" } } });
    expect(logs.join()).toContain("connection refused");
    expect(logs.join()).not.toContain("ada@example.com");
    expect(logs.join()).not.toContain(token);
  });

  it("refuses a token too short to be safe", () => {
    expect(() => createApp({ store: t, registry, token: "short" })).toThrow(/at least 16/);
  });
});
