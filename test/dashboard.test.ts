import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { createApp, type App } from "../functions/api/app.ts";
import { generateToken } from "../functions/api/auth.ts";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { throughput } from "../shared/observe/stats.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { createTestDb, type TestDb } from "./support/db.ts";

const token = generateToken();
const works = defineJob({ name: "dash.works", schema: z.object({ n: z.number() }), queue: "tp", handler: () => {} });
const breaks = defineJob({
  name: "dash.breaks", schema: z.object({ n: z.number() }), queue: "tp", maxAttempts: 1,
  handler: () => { throw new Error("nope"); },
});
const registry = createRegistry([works, breaks]);

describe("the dashboard page", () => {
  // A store that fails every query: the page and its assets must not need one.
  const app = createApp({ store: { db: { query: () => Promise.reject(new Error("no database here")) }, schema: "x" }, registry, token });

  it("serves the HTML shell without a token, with a strict CSP and no data", async () => {
    const res = await app.request("/dashboard");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const csp = res.headers.get("content-security-policy")!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:|\*/);
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const html = await res.text();
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('<script src="dashboard/app.js" defer></script>');
    // One section per listing the client fills in.
    for (const id of ["queues", "groups", "chart", "recurring", "dead"]) expect(html).toContain(`<div id="${id}"></div>`);
    // No inline script or style, nothing from another origin.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|\sstyle=|\son\w+=/i);
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
  });

  it("serves its script and stylesheet without a token; the script parses and never parses data as HTML", async () => {
    const js = await app.request("/dashboard/app.js");
    expect([js.status, js.headers.get("content-type")]).toEqual([200, "text/javascript; charset=utf-8"]);
    const source = await js.text();
    expect(() => new Function(source)).not.toThrow();
    expect(source).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/);
    expect(source).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    expect(source).toContain('"Bearer " + t');
    const css = await app.request("/dashboard/app.css");
    expect([css.status, css.headers.get("content-type")]).toEqual([200, "text/css; charset=utf-8"]);
    expect(await css.text()).not.toMatch(/@import|url\(/);
  });

  it("holds no data: a job's payload never reaches the shell", async () => {
    const t = await createTestDb("pg");
    try {
      const real = createApp({ store: t, registry, token });
      await enqueue(t, works, { n: 424242 }, { queue: "secret-queue-name" });
      const pages = await Promise.all(["/dashboard", "/dashboard/app.js", "/dashboard/app.css"].map(async (p) => (await real.request(p)).text()));
      for (const page of pages) expect(page).not.toMatch(/424242|secret-queue-name/);
    } finally {
      await t.drop();
    }
  });
});

describe("GET /v1/throughput", () => {
  let t: TestDb;
  let app: App;
  const get = async (path: string, auth = `Bearer ${token}`) => {
    const res = await app.request(path, { headers: auth ? { authorization: auth } : {} });
    return { status: res.status, body: (await res.json()) as any, headers: res.headers };
  };
  const sum = (buckets: any[], key: string) => buckets.reduce((n: number, b: any) => n + b[key], 0);

  beforeAll(async () => {
    t = await createTestDb("pg");
    app = createApp({ store: t, registry, token });
  });
  afterAll(() => t.drop());

  it("starts empty: one zeroed bucket per minute, oldest first, the current minute last", async () => {
    const { status, body } = await get("/v1/throughput?minutes=5");
    expect(status).toBe(200);
    expect(body.minutes).toBe(5);
    expect(body.buckets).toHaveLength(5);
    const starts = body.buckets.map((b: { minute: string }) => Date.parse(b.minute));
    for (let i = 1; i < starts.length; i++) expect(starts[i] - starts[i - 1]).toBe(60_000);
    expect(starts.every((m: number) => m % 60_000 === 0)).toBe(true);
    expect(Date.now() - starts[4]).toBeGreaterThanOrEqual(0);
    expect(Date.now() - starts[4]).toBeLessThan(65_000);
    expect(body.buckets[0]).toEqual({ minute: expect.any(String), succeeded: 0, failed: 0, timeout: 0, leaseExpired: 0 });
    expect((await get("/v1/throughput")).body.buckets).toHaveLength(15);
  });

  it("counts the attempts a worker ended, by outcome", async () => {
    for (let n = 0; n < 4; n++) await enqueue(t, works, { n });
    for (let n = 0; n < 2; n++) await enqueue(t, breaks, { n });
    const summary = await runWorker({ linger: "fixed", store: t, registry, queues: ["tp"], runnerId: "tp-runner", slots: 4, idleMs: 100, pollMs: 20 });
    expect(summary).toMatchObject({ succeeded: 4, failed: 2 });
    const { body } = await get("/v1/throughput?minutes=2");
    expect([sum(body.buckets, "succeeded"), sum(body.buckets, "failed"), sum(body.buckets, "timeout"), sum(body.buckets, "leaseExpired")])
      .toEqual([4, 2, 0, 0]);
  });

  it("puts each attempt in the minute it ended, leaves out older ones and released attempts", async () => {
    const { id } = await enqueue(t, works, { n: 99 }, { queue: "synthetic" });
    const now = Date.now();
    const at = (minutesAgo: number) => new Date(now - minutesAgo * 60_000);
    const insert = (outcome: string, ended: Date) =>
      t.admin.query(
        `insert into "${t.schema}".job_attempts (job_id, attempt, runner_id, claimed_at, ended_at, outcome)
         values ($1, 1, 'r', $2, $2, $3::"${t.schema}".attempt_outcome)`,
        [id, ended, outcome],
      );
    await insert("timeout", at(3));
    await insert("lease_expired", at(3));
    await insert("lease_expired", at(7));
    await insert("released", at(3));
    await insert("failed", at(20)); // outside a 15-minute window
    const { body } = await get("/v1/throughput?minutes=15");
    const bucketOf = (d: Date) => body.buckets.find((b: { minute: string }) => Date.parse(b.minute) === Math.floor(d.getTime() / 60_000) * 60_000);
    expect(bucketOf(at(3))).toMatchObject({ timeout: 1, leaseExpired: 1 });
    expect(bucketOf(at(7))).toMatchObject({ timeout: 0, leaseExpired: 1 });
    expect(bucketOf(at(20))).toBeUndefined();
    expect([sum(body.buckets, "succeeded"), sum(body.buckets, "failed"), sum(body.buckets, "timeout"), sum(body.buckets, "leaseExpired")])
      .toEqual([4, 2, 1, 2]);
    // The core function agrees, and a wider window takes in the older failure.
    const wide = await throughput(t, 30);
    expect(wide).toHaveLength(30);
    expect(wide.reduce((n, b) => n + b.failed, 0)).toBe(3);
  });

  it("reads the window through the ended_at BRIN index", async () => {
    await t.admin.query(`analyze "${t.schema}".job_attempts`);
    const client = await t.admin.connect();
    try {
      await client.query("set enable_seqscan = off");
      const { rows } = await client.query(
        `explain select count(*) from "${t.schema}".job_attempts where ended_at >= now() - interval '15 minutes'`,
      );
      expect(rows.map((r: any) => r["QUERY PLAN"]).join("\n")).toContain("job_attempts_ended_brin");
    } finally {
      client.release();
    }
  });

  it("needs the token: 401", async () => {
    for (const auth of ["", `Bearer ${token}x`]) {
      const res = await get("/v1/throughput?minutes=5", auth);
      expect([res.status, res.body.error.code]).toEqual([401, "unauthorized"]);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    }
  });

  it.each(["0", "61", "abc", "1.5", "-3", ""])("refuses minutes=%j with a 400 naming the field", async (minutes) => {
    const { status, body } = await get(`/v1/throughput?minutes=${minutes}`);
    expect(status).toBe(400);
    expect(body.error.code).toBe("invalid_request");
    expect(body.error.message).toMatch(/^minutes: /);
    expect(body.error.issues[0].path).toEqual(["minutes"]);
  });

  it("refuses an unknown query parameter", async () => {
    const { status, body } = await get("/v1/throughput?minutes=5&hours=1");
    expect(status).toBe(400);
    expect(body.error.message).toContain("hours");
  });

  it("is in the OpenAPI document with its bounds", async () => {
    const { body } = await get("/openapi.json");
    const op = body.paths["/v1/throughput"].get;
    expect(op.security).toEqual([{ bearer: [] }]);
    expect(op.parameters).toEqual([
      expect.objectContaining({ name: "minutes", in: "query", required: false, schema: expect.objectContaining({ minimum: 1, maximum: 60, default: 15 }) }),
    ]);
    expect(Object.keys(op.responses).sort()).toEqual(["200", "400", "401"]);
  });
});
