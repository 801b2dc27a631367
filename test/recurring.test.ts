import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { createApp } from "../functions/api/app.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { defineRecurring, enqueueTick, latestTick, listRecurring, nextTick } from "../shared/jobs/recurring.ts";
import { createTestDb, type TestDb } from "./support/db.ts";
import { startStack, until, type Stack } from "./support/stack.ts";

const ping = defineJob({ name: "ping", schema: z.object({ n: z.number() }), handler: () => {} });
const everyMinute = defineRecurring(ping, { name: "ping.minutely", cron: "* * * * *", timeZone: "UTC", payload: { n: 1 } });
const start = Date.parse("2026-12-01T12:00:30Z");

describe("recurring jobs (injected clock, real Postgres)", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg");
  });
  afterAll(() => t.drop());
  const jobs = async (name: string) =>
    (await t.admin.query<{ n: number }>(`select count(*)::int as n from "${t.schema}".jobs where name = $1`, [name])).rows[0]!.n;

  it("every minute for 10 minutes, each tick delivered twice to each of two schedulers at once: exactly 10 runs", async () => {
    const results: string[] = [];
    for (let minute = 1; minute <= 10; minute++) {
      const nowMs = start + minute * 60_000;
      const tick = latestTick(everyMinute, nowMs - 60_000, nowMs)!;
      // Two schedulers (two pools), each seeing the tick twice, all at once.
      const deliveries = [t.pool, t.admin, t.pool, t.admin].map((pool) => enqueueTick(pool, t.schema, everyMinute, tick, nowMs));
      results.push(...(await Promise.all(deliveries)));
    }
    expect(await jobs("ping")).toBe(10);
    expect(results.filter((r) => r === "enqueued")).toHaveLength(10);
    expect(results.filter((r) => r === "duplicate")).toHaveLength(30);
  });

  it("a tick delivered long after its time is skipped, or run late, as the recurring job chooses", async () => {
    const late = Date.parse("2026-12-01T13:00:00Z");
    const tick = new Date(late - 10 * 60_000);
    expect(await enqueueTick(t.pool, t.schema, { ...everyMinute, name: "ping.skip" }, tick, late)).toBe("skipped");
    expect(await enqueueTick(t.pool, t.schema, { ...everyMinute, name: "ping.late", missed: "run" }, tick, late)).toBe("enqueued");
    // A skipped tick is still recorded: delivered again, it stays skipped, never runs.
    expect(await enqueueTick(t.pool, t.schema, { ...everyMinute, name: "ping.skip", missed: "run" }, tick, late)).toBe("duplicate");
  });

  it("computes ticks in the job's time zone and lists each job with its last tick and next run", async () => {
    const paris = defineRecurring(ping, { name: "ping.paris", cron: "0 6 * * *", timeZone: "Europe/Paris", payload: { n: 2 } });
    expect(nextTick(paris, start)!.toISOString()).toBe("2026-12-02T05:00:00.000Z");
    const [listed] = await listRecurring(t, [everyMinute], start + 11 * 60_000);
    expect(listed).toMatchObject({ name: "ping.minutely", jobName: "ping", cron: "* * * * *", timeZone: "UTC", missed: "skip" });
    expect(listed!.lastTickAt!.toISOString()).toBe("2026-12-01T12:10:00.000Z");
    expect(listed!.nextRunAt!.toISOString()).toBe("2026-12-01T12:12:00.000Z");
  });

  it("refuses a bad cron expression, time zone or payload where the job is declared", () => {
    expect(() => defineRecurring(ping, { cron: "61 * * * *", timeZone: "UTC", payload: { n: 1 } })).toThrow();
    expect(() => defineRecurring(ping, { cron: "* * * * *", timeZone: "Mars/Olympus", payload: { n: 1 } })).toThrow();
    expect(() => defineRecurring(ping, { cron: "* * * * *", timeZone: "UTC", payload: { n: "one" } as never })).toThrow();
  });
});

describe("a recurring tick through the scheduler function", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({
      runners: { runner: { queues: ["default"], slots: 2, memoryMb: 256, timeoutSeconds: 20, maxLeaseMs: 5_000, idleMs: 300 } },
      scheduler: { pollMs: 200, timeoutSeconds: 12 },
      wake: { precisionMs: 2_000, startLeadMs: 1_000, armSlackMs: 1_000 },
    }, { jobs: new URL("./fixtures/recurring-jobs.ts", import.meta.url).pathname });
  });
  afterAll(() => s.close());

  it("runs once when EventBridge delivers the same tick twice, to two scheduler invocations at once", async () => {
    const tick = { source: "leasehold.recurring", name: "stamp.yearly", scheduledTime: new Date(Date.now() - 1_000).toISOString() };
    await Promise.all([s.invoke("scheduler", tick), s.invoke("scheduler", tick)]);
    const runs = async () =>
      (await s.t.admin.query<{ n: number }>(`select count(*)::int as n from "${s.t.schema}".jobs where name = 'e2e.stamp' and status = 'succeeded'`)).rows[0]!.n;
    await until(async () => (await runs()) === 1, 20_000, "the tick's job to run");
    await s.runtime.idle();
    expect(await runs()).toBe(1);
    const ticks = await s.t.admin.query(`select name, job_id from "${s.t.schema}".recurring_ticks`);
    expect(ticks.rows).toEqual([{ name: "stamp.yearly", job_id: expect.any(String) }]);
  });
});

describe("recurring jobs listed by the API", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg");
  });
  afterAll(() => t.drop());

  it("GET /v1/recurring lists each recurring job with its cron, time zone, last tick and next run", async () => {
    const token = "recurring-test-token-0123456789";
    const app = createApp({ registry: createRegistry([ping]), token, store: t, recurring: [everyMinute], jobsModule: "src/jobs.ts" });
    await enqueueTick(t.pool, t.schema, everyMinute, new Date("2026-12-01T12:00:00Z"), start);
    const res = await app.request("/v1/recurring", { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { recurring: Record<string, unknown>[]; jobsModule: string | null };
    // The dashboard names the app's own jobs module when it declares none.
    expect(body.jobsModule).toBe("src/jobs.ts");
    const unnamed = createApp({ registry: createRegistry([ping]), token, store: t });
    expect(await (await unnamed.request("/v1/recurring", { headers: { authorization: `Bearer ${token}` } })).json()).toEqual({ recurring: [], jobsModule: null });
    expect(body.recurring).toEqual([{
      name: "ping.minutely", jobName: "ping", cron: "* * * * *", timeZone: "UTC", missed: "skip",
      lastTickAt: "2026-12-01T12:00:00.000Z", nextRunAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:00\.000Z$/),
    }]);
    expect(Date.parse(body.recurring[0]!.nextRunAt as string)).toBeGreaterThan(Date.now());
  });
});
