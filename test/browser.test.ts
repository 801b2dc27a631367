/**
 * The dashboard in a real browser: headless Chromium (the system's, else the
 * @sparticuz/chromium dev dependency's; driven by playwright-core) against the
 * API served on 127.0.0.1, on a test schema.
 * Screenshots go to test/artifacts/ (git-ignored). Without a browser (see
 * test/support/chromium.ts), one test fails and says how to install one.
 */
import { mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { serve, type ServerType } from "@hono/node-server";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { createApp } from "../functions/api/app.ts";
import { generateToken } from "../functions/api/auth.ts";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { defineRecurring, enqueueTick, latestTick } from "../shared/jobs/recurring.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { findChromium } from "./support/chromium.ts";
import { createTestDb, type TestDb } from "./support/db.ts";

const chromiumFound = await findChromium();
const ARTIFACTS = fileURLToPath(new URL("./artifacts/", import.meta.url));
const QUEUE = "dashboard-e2e";
const token = generateToken();

// Fails its first run only. A retry resets `attempts` to 0, so the handler
// cannot tell a retry by its attempt number: this flag does.
let failNext = true;
const flaky = defineJob({
  name: "orders.sync",
  schema: z.object({ orderId: z.string(), note: z.string() }),
  queue: QUEUE,
  maxAttempts: 1,
  handler: async ({ orderId, note }, ctx) => {
    if (failNext) {
      failNext = false;
      throw new Error("upstream said <b>no</b> & closed the connection");
    }
    return ctx.step("sync", () => ({ synced: orderId, note }));
  },
});
// Traffic for the chart: every fourth job fails its first attempt, then succeeds.
const quick = defineJob({
  name: "email.digest",
  schema: z.object({ n: z.number().int() }),
  queue: QUEUE,
  maxAttempts: 3,
  backoffMs: 0,
  handler: ({ n }, ctx) => {
    if (n % 4 === 0 && ctx.attempt === 1) throw new Error("smtp 421, try again");
  },
});
const later = defineJob({ name: "report.weekly", schema: z.object({}), queue: "reports", handler: () => {} });
const registry = createRegistry([flaky, quick, later]);
// A type this deployment does not have (a newer deploy's): unserved on "reports".
const newer = defineJob({ name: "report.monthly", schema: z.object({}), queue: "reports", handler: () => {} });
const payload = { orderId: "A-17", note: "<img src=x onerror=alert(1)> & friends" };
// Recurring: one that has ticked (every 5 minutes, Paris time), one that never has.
const partnerCall = defineJob({
  name: "partner.call", schema: z.object({}), queue: "partner", handler: () => {}, rateLimit: { limit: 2, periodMs: 60_000, key: "partner-api" },
});
const hourly = defineJob({ name: "digest.hourly", schema: z.object({}), queue: "ticks", handler: () => {} });
const every5 = defineRecurring(hourly, { name: "reports.every-5", cron: "*/5 * * * *", timeZone: "Europe/Paris", payload: {} });
const nightly = defineRecurring(quick, { name: "digest.nightly", cron: "30 2 * * *", timeZone: "America/New_York", payload: { n: 1 }, missed: "run" });

if ("error" in chromiumFound) {
  describe("the dashboard in Chromium", () => {
    it("needs a Chromium to run in", () => {
      throw new Error(chromiumFound.error);
    });
  });
} else describe("the dashboard in Chromium", () => {
  const CHROMIUM = chromiumFound.path;
  let t: TestDb;
  let server: ServerType;
  let base: string;
  let browser: Browser;
  let page: Page;
  let deadId: string;
  let ticked: Date;
  const problems: string[] = [];
  const offOrigin: string[] = [];

  const work = (runnerId: string) =>
    runWorker({ linger: "fixed", store: t, registry, queues: [QUEUE], runnerId, slots: 4, idleMs: 300, pollMs: 20 });

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    t = await createTestDb("pg");
    const app = createApp({ store: t, registry, token, serving: new Map([[QUEUE, 60_000], ["reports", 60_000]]), recurring: [every5, nightly] });
    const address = await new Promise<AddressInfo>((resolve) => {
      server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, resolve);
    });
    base = `http://127.0.0.1:${address.port}`;

    // A dead job: one attempt, failed by runner-e2e-1. Plus traffic and backlog.
    deadId = (await enqueue(t, flaky, payload)).id;
    for (let n = 0; n < 12; n++) await enqueue(t, quick, { n });
    await work("runner-e2e-1");
    // A past tick of every5 (its job stays queued on "ticks", which nothing here runs).
    ticked = latestTick(every5, Date.now() - 3_600_000, Date.now() - 300_000)!;
    expect(await enqueueTick(t.pool, t.schema, every5, ticked, ticked.getTime())).toBe("enqueued");
    for (let n = 0; n < 2; n++) await enqueue(t, later, {}, { delayMs: 600_000 });
    await enqueue(t, later, {}, { runAt: new Date(Date.now() - 90_000) });
    await enqueue(t, newer, {});
    await enqueue(t, later, {}, { queue: "tenants", group: "tenant-7" });
    // Three calls to a partner API limited to 2 a minute: two started, one waits for the window.
    for (let n = 0; n < 3; n++) await enqueue(t, partnerCall, {});
    expect(await claimJobs(t, { queue: "partner", runnerId: "gone", limit: 3, maxLeaseMs: 60_000, rated: true })).toHaveLength(2);

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"],
    });
    page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
    page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`); });
    page.on("dialog", (d) => { problems.push(`dialog: ${d.message()}`); void d.dismiss(); });
    page.on("request", (r) => { if (!r.url().startsWith(`${base}/`) && !r.url().startsWith("data:")) offOrigin.push(r.url()); });
  });

  afterAll(async () => {
    await browser?.close();
    server?.close();
    (server as { closeAllConnections?: () => void } | undefined)?.closeAllConnections?.();
    await t?.drop();
  });

  const row = (section: string, id: string) => page.locator(`#${section} tr[data-job="${id}"]`);

  it("signs in from #token=..., then takes the token out of the address bar", async () => {
    await page.goto(`${base}/dashboard#token=${encodeURIComponent(token)}`);
    await page.locator(`#queues tr[data-queue="${QUEUE}"]`).waitFor();
    expect(page.url()).toBe(`${base}/dashboard`);
    expect(await page.evaluate(() => sessionStorage.getItem("leasehold.token"))).toBe(token);
  });

  it("shows the queues (with their unserved jobs), the throughput chart, and the dead job with its attempt", async () => {
    const cells = async (queue: string) => page.locator(`#queues tr[data-queue="${queue}"] > *`).allTextContents();
    expect(await page.locator("#queues thead th").allTextContents()).toEqual(
      ["Queue", "Ready", "Unserved", "Delayed", "Running", "Dead", "Oldest ready"]);
    expect(await cells(QUEUE)).toEqual([QUEUE, "0", "0", "0", "0", "1", "—"]);
    const reports = await cells("reports");
    expect(reports.slice(0, 6)).toEqual(["reports", "2", "1", "2", "0", "0"]);
    expect(reports[6]).toMatch(/^1m \d+s$/);
    expect(await page.locator('#queues tr[data-queue="reports"] td.unserved').textContent()).toBe("1");

    const group = async (queue: string, name: string) =>
      page.locator(`#groups tr[data-queue="${queue}"][data-group="${name}"] > *`).allTextContents();
    expect(await group("tenants", "tenant-7")).toEqual(["tenants", "tenant-7", "1", "0", "—"]);
    expect(await group("reports", "")).toEqual(["reports", "—", "2", "0", "—"]);
    const rate = page.locator('#rates tr[data-rate-key="partner-api"]');
    expect(await rate.locator("th, td").allTextContents()).toEqual(["partner-api", "1", "2 / 2", "60000 ms", expect.any(String)]);
    expect(Date.parse((await rate.locator("time").getAttribute("datetime"))!)).toBeGreaterThan(Date.now() + 50_000);

    // 13 first attempts, 3 of them failed and retried: 15 attempts ended, 4 failed.
    await page.locator('#chart li[data-series="succeeded"] strong', { hasText: /^12$/ }).waitFor();
    expect(await page.locator('#chart li[data-series="failed"] strong').textContent()).toBe("4");
    expect(await page.locator("#chart svg rect.bar").count()).toBeGreaterThan(0);

    const dead = row("dead", deadId);
    await dead.waitFor();
    expect(await dead.locator("td").first().textContent()).toBe(`#${deadId}`);
    const attempt = dead.locator("ol.attempts li");
    expect(await attempt.count()).toBe(1);
    expect(await attempt.locator(".runner").textContent()).toBe("runner-e2e-1");
    expect(await attempt.locator(".badge").textContent()).toBe("failed");
    // The error's first line, as text: its markup is not parsed.
    expect(await attempt.locator("summary").textContent()).toBe("Error: upstream said <b>no</b> & closed the connection");
    expect(await page.locator("#dead b").count()).toBe(0);
    await page.screenshot({ path: `${ARTIFACTS}dashboard-dead-job.png`, fullPage: true });
  });

  it("lists the recurring jobs with their cron, time zone, last tick and next run", async () => {
    const cells = async (name: string) => page.locator(`#recurring tr[data-recurring="${name}"] > *`).allTextContents();
    await page.locator('#recurring tr[data-recurring="reports.every-5"]').waitFor();
    expect(await page.locator("#recurring thead th").allTextContents()).toEqual(
      ["Name", "Job", "Cron", "Time zone", "Missed ticks", "Last tick", "Next run"]);
    expect((await cells("reports.every-5")).slice(0, 5)).toEqual(["reports.every-5", "digest.hourly", "*/5 * * * *", "Europe/Paris", "skip"]);
    expect((await cells("digest.nightly")).slice(0, 6)).toEqual(["digest.nightly", "email.digest", "30 2 * * *", "America/New_York", "run late", "—"]);
    const at = (name: string, cell: string) => page.locator(`#recurring tr[data-recurring="${name}"] td.${cell} time`).getAttribute("datetime");
    expect(await at("reports.every-5", "last")).toBe(ticked.toISOString());
    // The next run is the API's, which croner computes in the job's time zone.
    const api = await (await fetch(`${base}/v1/recurring`, { headers: { authorization: `Bearer ${token}` } })).json() as
      { recurring: { name: string; nextRunAt: string }[] };
    const next = async (name: string) => {
      const shown = await at(name, "next");
      expect(shown).toBe(api.recurring.find((r) => r.name === name)!.nextRunAt);
      return new Date(shown!).getTime() - Date.now();
    };
    const every5In = await next("reports.every-5");
    expect(every5In).toBeGreaterThan(-5_000);
    expect(every5In).toBeLessThanOrEqual(300_000);
    expect(new Date(await at("digest.nightly", "next") ?? "").getTime()).toBeGreaterThan(Date.now());
    await next("digest.nightly");
  });

  it("retries the dead job; once a worker runs it, the page shows it succeeded without a reload", async () => {
    await row("dead", deadId).locator("button.retry").click();
    await row("retried", deadId).locator(".badge", { hasText: "queued" }).waitFor();
    await page.locator("#dead .empty", { hasText: "No dead jobs." }).waitFor();

    const summary = await work("runner-e2e-2");
    expect(summary).toMatchObject({ succeeded: 1, failed: 0 });
    await row("retried", deadId).locator(".badge", { hasText: "succeeded" }).waitFor({ timeout: 10_000 });
    // Nothing pending, running or dead is left in the queue: its row goes.
    await page.locator(`#queues tr[data-queue="${QUEUE}"]`).waitFor({ state: "detached" });
    await page.locator('#chart li[data-series="succeeded"] strong', { hasText: /^13$/ }).waitFor({ timeout: 10_000 });
    await page.screenshot({ path: `${ARTIFACTS}dashboard-after-retry.png`, fullPage: true });
  });

  it("opens the job's page: its payload, its result and both attempts with their steps", async () => {
    await row("retried", deadId).locator("a").click();
    expect(page.url()).toBe(`${base}/dashboard#/jobs/${deadId}`);
    const history = page.locator("#job table.history tbody tr");
    await history.first().waitFor();
    expect(JSON.parse((await page.locator("#job pre.payload:not(.result)").textContent())!)).toEqual(payload);
    expect(await page.locator("#job img").count()).toBe(0);
    expect(await page.locator("#job .job-head .badge").textContent()).toBe("succeeded");
    const rows = await history.evaluateAll((trs) => trs.map((tr) => Array.from(tr.children, (td) => td.textContent)));
    // Columns: Run, Gen, Runner, Claimed, Took, Outcome, Steps, Error. The retry is generation 2, attempt 2.
    expect(rows.map((r) => [r[0], r[1], r[2], r[5]])).toEqual([["1", "1", "runner-e2e-1", "failed"], ["2", "2", "runner-e2e-2", "succeeded"]]);
    expect(rows[0]![7]).toContain("upstream said <b>no</b>");
    expect(JSON.parse((await page.locator("#job pre.result").textContent())!)).toEqual({ synced: payload.orderId, note: payload.note });
    expect(rows[0]![6]).toBe("");
    expect(rows[1]![6]).toMatch(/^sync \d+ms$/);
    await page.screenshot({ path: `${ARTIFACTS}job-page.png`, fullPage: true });

    await page.goBack();
    await page.locator("#overview").waitFor();
  });

  it("loaded nothing from elsewhere, broke no CSP rule, threw nothing", () => {
    expect(offOrigin).toEqual([]);
    expect(problems).toEqual([]);
  });

  it("asks for the token when it has none, and says when it is refused", async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 700 } });
    try {
      const fresh = await context.newPage();
      await fresh.goto(`${base}/dashboard`);
      await fresh.locator("#login-form").waitFor();
      expect(await fresh.locator("#overview").isVisible()).toBe(false);
      await fresh.fill("#token-input", `${token}-wrong`);
      await fresh.click('#login-form button[type="submit"]');
      await fresh.locator("#login-error", { hasText: "refused" }).waitFor();
      expect(await fresh.evaluate(() => sessionStorage.getItem("leasehold.token"))).toBeNull();
      await fresh.screenshot({ path: `${ARTIFACTS}dashboard-sign-in.png` });
      await fresh.fill("#token-input", token);
      await fresh.click('#login-form button[type="submit"]');
      await fresh.locator('#queues tr[data-queue="reports"]').waitFor();
      await fresh.click("#signout");
      await fresh.locator("#login-form").waitFor();
      expect(await fresh.evaluate(() => sessionStorage.getItem("leasehold.token"))).toBeNull();
    } finally {
      await context.close();
    }
  });
});
