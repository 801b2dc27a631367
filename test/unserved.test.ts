/**
 * Jobs no runner can claim (queue not served, type not deployed, lease too
 * long): counted unserved, never demand. Real Postgres; the scheduler's pass
 * runs in process with Lambda's Invoke replaced.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../functions/api/app.ts";
import { generateToken } from "../functions/api/auth.ts";
import { schedulePass } from "../functions/scheduler.ts";
import { registry, sendWelcomeEmail } from "../jobs/index.ts";
import config from "../leasehold.config.ts";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { createRegistry } from "../shared/jobs/job.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { claimable, servingRules } from "../shared/settings/serving.ts";
import { countReady, countReadyEach, queueStats } from "../shared/observe/stats.ts";
import { createTestDb, type TestDb } from "./support/db.ts";
import { noop } from "./support/jobs.ts";

const token = generateToken();
const welcome = { to: "ada@example.com", name: "Ada" };

describe("unserved jobs", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg");
  });
  afterAll(() => t.drop());

  /** A job as another deploy's enqueue would write it: nothing here checks it. */
  const insert = async (name: string, queue: string, leaseMs = 30_000, delayMs = 0) => {
    const { rows } = await t.admin.query<{ id: string }>(
      `insert into "${t.schema}".jobs (queue, name, payload, max_attempts, lease_ms, backoff_ms, run_at)
       values ($1, $2, '{}', 3, $3, 0, now() + $4::integer * interval '1 millisecond') returning id::text`,
      [queue, name, leaseMs, delayMs],
    );
    return rows[0]!.id;
  };
  const clear = () => t.admin.query(`delete from "${t.schema}".jobs; delete from "${t.schema}".runners`);
  const can = claimable(config, registry.keys());
  const stat = async (queue: string) => (await queueStats(t, can)).find((s) => s.queue === queue);

  it("describes what the configured runners can claim: every served queue with its longest lease, the deployed types", () => {
    const two = { runners: { a: { queues: ["q", "r"], maxLeaseMs: 10_000 }, b: { queues: ["r"], maxLeaseMs: 60_000 } } };
    const c = claimable(two, ["x", "y"]);
    expect(c.names).toEqual(["x", "y"]);
    expect([...c.maxLeaseMs]).toEqual([["q", 10_000], ["r", 60_000]]);
    expect([...claimable({ runners: { a: two.runners.a } }, []).maxLeaseMs]).toEqual([["q", 10_000], ["r", 10_000]]);
  });

  it("counts as unserved a ready job of an unknown type, on an unserved queue, or with too long a lease; not a served or delayed one", async () => {
    await clear();
    await enqueue(t, sendWelcomeEmail, welcome);
    await insert("from.a.newer.deploy", "default");
    await insert("from.a.newer.deploy", "default", 30_000, 60_000); // not ready yet
    await insert("email.welcome", "nobody-serves-this");
    await insert("email.welcome", "default", config.runners.runner!.maxLeaseMs + 1);
    expect(await stat("default")).toMatchObject({ ready: 3, unserved: 2, delayed: 1 });
    expect(await stat("nobody-serves-this")).toMatchObject({ ready: 1, unserved: 1 });
    // Told nothing of the runners, it counts nothing unserved.
    expect((await queueStats(t)).find((s) => s.queue === "default")).toMatchObject({ ready: 3, unserved: 0 });
  });

  it("the scheduler's demand is only what a runner can claim", async () => {
    const runner = claimable({ runners: { runner: config.runners.runner! } }, registry.keys());
    expect(await countReady(t, runner, 100)).toBe(1);
    expect(await countReady(t, claimable({ runners: { runner: config.runners.runner! } }, []), 100)).toBe(0);
  });

  it("counts several runners' demand in one statement, each over its own queues, leases and cap", async () => {
    await clear();
    for (let i = 0; i < 4; i++) await insert("noop", "shared");
    await insert("noop", "only-b");
    await insert("noop", "only-b", 50_000);
    const runners = { a: { queues: ["shared"], maxLeaseMs: 40_000 }, b: { queues: ["shared", "only-b"], maxLeaseMs: 40_000 } };
    const each = (name: keyof typeof runners, cap: number) => ({ key: name, maxLeaseMs: claimable({ runners: { [name]: runners[name] } }, []).maxLeaseMs, cap });
    const ready = await countReadyEach(t, ["noop"], [each("a", 3), each("b", 10), { ...each("a", 10), key: "a10" }], 0);
    // a: 4 ready, capped at 3; b: the 4 it shares and 1 of its own (the other's lease is too long); a10, a's queue under its own cap.
    expect(Object.fromEntries(ready)).toEqual({ a: 3, b: 5, a10: 4 });
    expect(Object.fromEntries(await countReadyEach(t, [], [each("a", 3)], 0))).toEqual({ a: 0 });
    // The single count is the same statement.
    expect(await countReady(t, claimable({ runners: { b: runners.b } }, ["noop"]), 10)).toBe(5);
  });

  it("a runner leaves a job whose lease is longer than its maxLeaseMs, however much time it has left", async () => {
    await clear();
    const long = await insert("noop", "leases", 10_000);
    await insert("noop", "leases", 1_000);
    const summary = await runWorker({
      linger: "fixed",
      store: t, registry: createRegistry([noop]), queues: ["leases"], runnerId: "r", slots: 2,
      remainingMs: () => 600_000, maxLeaseMs: 5_000, idleMs: 50, pollMs: 10,
    });
    expect(summary.claimed).toBe(1);
    const { rows } = await t.admin.query(`select status::text, attempts from "${t.schema}".jobs where id = $1`, [long]);
    expect(rows[0]).toEqual({ status: "queued", attempts: 0 });
  });

  it("starts no runner over 5 minutes of passes for jobs no runner can claim, and one for a job it can", async () => {
    await clear();
    await insert("from.a.newer.deploy", "default");
    await insert("email.welcome", "nobody-serves-this");
    await insert("email.welcome", "default", config.runners.runner!.maxLeaseMs + 1);
    const invoked: string[] = [];
    const invoke = async (runner: string) => void invoked.push(runner);
    const passes = Math.ceil((5 * 60_000) / config.scheduler.pollMs);
    for (let pass = 0; pass < passes; pass++) {
      expect(await schedulePass({ config, registry }, t.pool, t.schema, invoke)).toEqual({ ready: 0, invoked: 0, covered: false });
    }
    expect(invoked).toEqual([]);
    await enqueue(t, sendWelcomeEmail, welcome);
    // The runner it started (the light one, for a job alone) will claim the job: nothing ready is left to watch.
    expect(await schedulePass({ config, registry }, t.pool, t.schema, invoke)).toEqual({ ready: 1, invoked: 1, covered: true });
    expect(invoked).toEqual(["runner-light"]);
    // The next pass counts on that live runner: it may be on its way out, so the job is still watched.
    expect(await schedulePass({ config, registry }, t.pool, t.schema, invoke)).toEqual({ ready: 1, invoked: 0, covered: false });
  });

  it("reports a refused Invoke as nothing invoked, and drops its reservation", async () => {
    await clear();
    await enqueue(t, sendWelcomeEmail, welcome);
    const refused = async () => {
      throw new Error("TooManyRequestsException: Rate Exceeded.");
    };
    expect(await schedulePass({ config, registry }, t.pool, t.schema, refused)).toEqual({ ready: 1, invoked: 0, covered: false });
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".runners`);
    expect(rows[0]).toEqual({ n: 0 });
  });

  it("asks nothing of a runner function that backs off: no reservation, no Invoke, its jobs still watched", async () => {
    await clear();
    await enqueue(t, sendWelcomeEmail, welcome);
    const invoked: string[] = [];
    const held: string[] = [];
    const invoke = async (runner: string) => void invoked.push(runner);
    const canStart = (fn: string) => (held.push(fn), false);
    expect(await schedulePass({ config, registry }, t.pool, t.schema, invoke, { canStart })).toEqual({ ready: 1, invoked: 0, covered: false });
    expect([invoked, held]).toEqual([[], ["runner-light"]]);
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".runners`);
    expect(rows[0]).toEqual({ n: 0 });
    // Once it may be asked again, the same pass starts it.
    expect(await schedulePass({ config, registry }, t.pool, t.schema, invoke, { canStart: () => true })).toEqual({ ready: 1, invoked: 1, covered: true });
  });

  it("GET /v1/queues shows unserved per queue, by the deployment's rules and registry", async () => {
    await clear();
    await enqueue(t, sendWelcomeEmail, welcome);
    await insert("from.a.newer.deploy", "default");
    await insert("email.welcome", "nobody-serves-this");
    const app = createApp({ store: t, registry, token, serving: servingRules(config) });
    const res = await app.request("/v1/queues", { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    const { queues } = (await res.json()) as { queues: { queue: string; ready: number; unserved: number }[] };
    expect(queues.map((q) => [q.queue, q.ready, q.unserved])).toEqual([["default", 2, 1], ["nobody-serves-this", 1, 1]]);
  });
});
