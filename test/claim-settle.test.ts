import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { claimJobs, type ClaimedJob } from "../shared/lifecycle/claim.ts";
import { CLAIMS } from "../shared/lifecycle/claim-sql.ts";
import { PARTS, settleStatement } from "../shared/lifecycle/settle-sql.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { sql, statementName } from "../shared/db/db.ts";
import { enqueue, enqueueFollowUp, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { INSERT_FOLLOW_UP, INSERT_JOBS, INSERT_ONE } from "../shared/lifecycle/enqueue-sql.ts";
import { completeJobs, extendLease, failJobs, releaseJobs, settledEarlier, settleJobs } from "../shared/lifecycle/settle.ts";
import { createTestDb, drivers, expireLeases, type TestDb } from "./support/db.ts";
import { noop } from "./support/jobs.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import * as z from "zod";

// A lease runs out when the test moves it into the past (`expireLeases`), not by waiting.
const short = defineJob({ name: "short", schema: z.object({}), handler: () => {}, leaseMs: 60_000, backoffMs: 0 });

describe.each(drivers)("claim and settle (%s driver)", (driver) => {
  let t: TestDb;
  let queueNo = 0;
  /** Each test works in a queue of its own. */
  const freshQueue = () => `q${queueNo++}`;
  beforeAll(async () => {
    t = await createTestDb(driver, 12);
  });
  afterAll(() => t.drop());

  const row = async (id: string) =>
    (await t.admin.query<any>(`select *, lease_token::text as token from "${t.schema}".jobs where id = $1`, [id])).rows[0]!;
  const attemptRows = async (id: string) =>
    (await t.admin.query<any>(`select * from "${t.schema}".attempts where job_id = $1 order by ended_at, attempt`, [id])).rows;
  const claimOne = async (queue: string, runnerId = "r1", maxLeaseMs = 60_000) =>
    (await claimJobs(t, { queue, runnerId, limit: 1, maxLeaseMs }))[0];

  it("8 concurrent claimers draining 10,000 jobs never claim one twice", async () => {
    const queue = freshQueue();
    await enqueueJobs(t, Array.from({ length: 10_000 }, (_, n) => job(noop, { n }, { queue })));
    const claimed: string[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, c) => {
        for (;;) {
          const jobs = await claimJobs(t, { queue, runnerId: `claimer-${c}`, limit: 25, maxLeaseMs: 60_000 });
          if (jobs.length === 0) return;
          for (const j of jobs) claimed.push(j.id);
        }
      }),
    );
    expect(claimed).toHaveLength(10_000);
    expect(new Set(claimed).size).toBe(10_000);
    const { rows } = await t.admin.query<{ status: string; attempts: number; n: number }>(
      `select status::text, attempts, count(*)::int as n from "${t.schema}".jobs where queue = $1 group by 1, 2`,
      [queue],
    );
    expect(rows).toEqual([{ status: "running", attempts: 1, n: 10_000 }]);
  });

  it("counts the attempt in the claim itself, before any settle", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, noop, { n: 1 }, { queue });
    const claimed = await claimOne(queue);
    expect(claimed).toMatchObject({ id, attempts: 1 });
    expect(await row(id)).toMatchObject({ status: "running", attempts: 1, runner_id: "r1" });
    expect(await attemptRows(id)).toEqual([]);
  });

  it("never hands a held job to another claimer while its lease is valid", async () => {
    const queue = freshQueue();
    await enqueue(t, noop, { n: 1 }, { queue });
    expect(await claimOne(queue, "first")).toBeDefined();
    expect(await claimOne(queue, "second")).toBeUndefined();
  });

  it("never hands out a job whose lease would outlive the caller's time", async () => {
    const queue = freshQueue();
    await enqueue(t, noop, { n: 1 }, { queue }); // 30 s lease
    expect(await claimOne(queue, "r", 29_999)).toBeUndefined();
    expect(await claimOne(queue, "r", 30_000)).toBeDefined();
  });

  it("claims higher priority first, then earlier run_at", async () => {
    const queue = freshQueue();
    const low = await enqueue(t, noop, { n: 1 }, { queue, priority: 0 });
    const high = await enqueue(t, noop, { n: 2 }, { queue, priority: 5 });
    const jobs = await claimJobs(t, { queue, runnerId: "r", limit: 2, maxLeaseMs: 60_000 });
    expect(jobs.map((j) => j.id)).toEqual([high.id, low.id]);
  });

  it("does not claim a job before its run_at", async () => {
    const queue = freshQueue();
    await enqueue(t, noop, { n: 1 }, { queue, delayMs: 60_000 });
    expect(await claimOne(queue)).toBeUndefined();
  });

  it("completes with a fenced write and leaves the attempt row", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, noop, { n: 1 }, { queue });
    const claimed = (await claimOne(queue, "runner-a"))!;
    const done = await completeJobs(t, [{ id, leaseToken: claimed.leaseToken }]);
    expect([...done]).toEqual([id]);
    // The token stays on the settled row: a retried settle can see it was ours.
    expect(await row(id)).toMatchObject({ status: "succeeded", attempts: 1, token: claimed.leaseToken });
    const attempts = await attemptRows(id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ attempt: 1, runner_id: "runner-a", outcome: "succeeded", error: null });
    expect(attempts[0]!.ended_at.getTime()).toBeGreaterThanOrEqual(attempts[0]!.claimed_at.getTime());
  });

  it("a success without steps writes no attempt row: its job row is its record, read through the attempts view", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, noop, { n: 1 }, { queue });
    const claimed = (await claimOne(queue, "runner-b"))!;
    await completeJobs(t, [{ id, leaseToken: claimed.leaseToken }]);
    const written = await t.admin.query(`select 1 from "${t.schema}".job_attempts where job_id = $1`, [id]);
    expect(written.rowCount).toBe(0);
    const job = await row(id);
    expect(await attemptRows(id)).toEqual([{
      job_id: job.id, attempt: job.runs, generation: job.generation, runner_id: "runner-b",
      claimed_at: job.started_at, ended_at: job.finished_at, outcome: "succeeded", error: null, steps: null,
    }]);
  });

  it("refuses a settle with a token that is not the current one, changing nothing", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, noop, { n: 1 }, { queue });
    const first = (await claimOne(queue))!;
    const bogus = { id, leaseToken: "00000000-0000-4000-8000-000000000000" };
    expect((await completeJobs(t, [bogus])).size).toBe(0);
    expect((await failJobs(t, [{ ...bogus, outcome: "failed", error: "x", retryDelayMs: 0 }])).size).toBe(0);
    expect((await releaseJobs(t, [bogus])).size).toBe(0);
    expect(await extendLease(t, bogus, 60_000)).toBeNull();
    expect(await row(id)).toMatchObject({ status: "running", token: first.leaseToken, attempts: 1 });
    expect(await attemptRows(id)).toEqual([]);
  });

  it("refuses an id or token that is not one, whole, as an element of its own: no list is read into another job's", async () => {
    const queue = freshQueue();
    await enqueueJobs(t, [job(noop, { n: 1 }, { queue }), job(noop, { n: 2 }, { queue })]);
    const [a, b] = await claimJobs(t, { queue, runnerId: "r1", limit: 2, maxLeaseMs: 60_000 });
    // Written into an array literal as they stand, "a,b" would be two ids and "x,token" two tokens.
    const spliced = [{ id: `${a!.id},${b!.id}`, leaseToken: `${a!.leaseToken},${b!.leaseToken}` }];
    await expect(completeJobs(t, spliced)).rejects.toThrow(/invalid input syntax/);
    const quoted = [{ id: a!.id, leaseToken: `"${a!.leaseToken}"` }, { id: b!.id, leaseToken: `{${b!.leaseToken}}` }];
    await expect(completeJobs(t, quoted)).rejects.toThrow(/invalid input syntax|malformed/);
    for (const { id, leaseToken } of [a!, b!]) expect(await row(id)).toMatchObject({ status: "running", token: leaseToken });
    // Ids and tokens as the claim gave them still settle, in one array each.
    expect([...(await completeJobs(t, [a!, b!]))].sort()).toEqual([a!.id, b!.id].sort());
  });

  it("issues a fresh lease token on every claim", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, noop, { n: 1 }, { queue });
    const tokens = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const c = (await claimOne(queue))!;
      tokens.add(c.leaseToken);
      await releaseJobs(t, [c]);
    }
    expect(tokens.size).toBe(3);
    expect(await row(id)).toMatchObject({ status: "queued", attempts: 0 });
  });

  it("gives every job of one claim a token of its own", async () => {
    const queue = freshQueue();
    await enqueueJobs(t, Array.from({ length: 50 }, (_, n) => job(noop, { n }, { queue })));
    const jobs = await claimJobs(t, { queue, runnerId: "r1", limit: 50, maxLeaseMs: 60_000 });
    expect(jobs).toHaveLength(50);
    expect(new Set(jobs.map((j) => j.leaseToken)).size).toBe(50);
    // A token one job holds settles no other job.
    const [a, b] = jobs;
    expect((await completeJobs(t, [{ id: a!.id, leaseToken: b!.leaseToken }])).size).toBe(0);
    expect((await completeJobs(t, [a!])).size).toBe(1);
  });

  it("fails into a retry with backoff, then into dead on the last attempt", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, noop, { n: 1 }, { queue, maxAttempts: 2 });
    const first = (await claimOne(queue))!;
    const status1 = await failJobs(t, [{ ...first, outcome: "failed", error: "boom", retryDelayMs: 60_000 }]);
    expect(status1.get(id)).toBe("queued");
    const afterFirst = await row(id);
    expect(afterFirst).toMatchObject({ status: "queued", attempts: 1, last_error: "boom" });
    expect(afterFirst.run_at.getTime()).toBeGreaterThan(Date.now() + 50_000);
    expect(await claimOne(queue)).toBeUndefined(); // backing off

    await t.admin.query(`update "${t.schema}".jobs set run_at = now() where id = $1`, [id]);
    const second = (await claimOne(queue))!;
    const status2 = await failJobs(t, [{ ...second, outcome: "timeout", error: "too slow", retryDelayMs: 0 }]);
    expect(status2.get(id)).toBe("dead");
    expect(await row(id)).toMatchObject({ status: "dead", attempts: 2, last_error: "too slow" });
    expect((await attemptRows(id)).map((a) => [a.attempt, a.outcome, a.error])).toEqual([
      [1, "failed", "boom"],
      [2, "timeout", "too slow"],
    ]);
  });

  it("releases without charging the attempt, and records the release", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, noop, { n: 1 }, { queue });
    const c = (await claimOne(queue, "leaving"))!;
    expect([...(await releaseJobs(t, [c]))]).toEqual([id]);
    expect(await row(id)).toMatchObject({ status: "queued", attempts: 0, token: c.leaseToken });
    expect(await attemptRows(id)).toMatchObject([{ attempt: 1, outcome: "released", runner_id: "leaving" }]);
    // The next claim charges attempt 1 again, but its row gets a number of its own.
    const again = (await claimOne(queue, "next"))!;
    expect(again).toMatchObject({ attempts: 1, run: 2 });
    await completeJobs(t, [again]);
    expect((await attemptRows(id)).map((a: any) => [a.attempt, a.outcome])).toEqual([[1, "released"], [2, "succeeded"]]);
  });

  it("refuses a failure or a release that arrives after the lease expired, like a success", async () => {
    const queue = freshQueue();
    await enqueueJobs(t, [job(short, {}, { queue }), job(short, {}, { queue })]);
    const [a, b] = await claimJobs(t, { queue, runnerId: "late", limit: 2, maxLeaseMs: 60_000 });
    expect(await expireLeases(t, "queue = $1", [queue])).toBe(2);
    expect((await failJobs(t, [{ ...a!, outcome: "failed", error: "late", retryDelayMs: 0 }])).size).toBe(0);
    expect((await releaseJobs(t, [b!])).size).toBe(0);
    expect((await settleJobs(t, { started: [a!, b!] })).started.size).toBe(0);
    expect(await row(a!.id)).toMatchObject({ status: "running", attempts: 1 });
    expect(await row(b!.id)).toMatchObject({ status: "running", attempts: 1 });
    expect(await attemptRows(a!.id)).toEqual([]);
  });

  it("records a start and a success of other jobs in one statement, and knows its own earlier settles", async () => {
    const queue = freshQueue();
    await enqueueJobs(t, [job(noop, { n: 1 }, { queue }), job(noop, { n: 2 }, { queue })]);
    const [a, b] = await claimJobs(t, { queue, runnerId: "r", limit: 2, maxLeaseMs: 60_000 });
    const written = await settleJobs(t, { started: [a!], succeeded: [b!] });
    expect([...written.started]).toEqual([a!.id]);
    expect([...written.succeeded]).toEqual([b!.id]);
    expect(await row(a!.id)).toMatchObject({ status: "running", handler_started: true });
    // A retry after a lost answer: b was settled by us, a is still ours to settle.
    expect(await settledEarlier(t, [a!, b!])).toEqual(new Map([[b!.id, "succeeded"]]));
    expect(await settledEarlier(t, [{ ...b!, leaseToken: a!.leaseToken }])).toEqual(new Map());
  });

  it("writes every combination of starts, successes, failures and releases in one statement", async () => {
    // The statement is composed per combination of kinds: each of the 15 is
    // run here, with one job per kind present and one stale lease per kind.
    const kinds = ["started", "succeeded", "failed", "released"] as const;
    for (let mask = 1; mask < 16; mask++) {
      const present = kinds.filter((_, i) => mask & (1 << i));
      const queue = freshQueue();
      await enqueueJobs(t, present.map((_, n) => job(noop, { n }, { queue })));
      const claimed = await claimJobs(t, { queue, runnerId: "r", limit: present.length, maxLeaseMs: 60_000 });
      const of = (k: (typeof kinds)[number]) => claimed[present.indexOf(k)]!;
      const stale = (l: ClaimedJob) => ({ ...l, leaseToken: "00000000-0000-0000-0000-000000000000" });
      const batch = {
        started: present.includes("started") ? [of("started")] : [],
        succeeded: present.includes("succeeded") ? [of("succeeded"), stale(of("succeeded"))] : [],
        failed: present.includes("failed")
          ? [{ ...of("failed"), outcome: "timeout" as const, error: `e${mask}`, retryDelayMs: 0, permanent: true }]
          : [],
        released: present.includes("released") ? [of("released")] : [],
      };
      const written = await settleJobs(t, batch);
      expect(written.started).toEqual(new Set(batch.started.map((l) => l.id)));
      expect(written.succeeded).toEqual(new Set(batch.succeeded.slice(0, 1).map((l) => l.id)));
      expect(written.failed).toEqual(new Map(batch.failed.map((f) => [f.id, "dead"])));
      expect(written.released).toEqual(new Set(batch.released.map((l) => l.id)));
      const expected: Record<string, [string, string | null]> = {
        started: ["running", null], succeeded: ["succeeded", "succeeded"], failed: ["dead", "timeout"], released: ["queued", "released"],
      };
      for (const k of present) {
        const [status, outcome] = expected[k]!;
        expect(await row(of(k).id)).toMatchObject({ status, handler_started: k === "started" });
        expect((await attemptRows(of(k).id)).map((a) => a.outcome)).toEqual(outcome ? [outcome] : []);
      }
    }
  });

  it("extends a valid lease, and refuses to revive an expired one", async () => {
    const queue = freshQueue();
    await enqueue(t, short, {}, { queue });
    const c = (await claimOne(queue))!;
    const extended = await extendLease(t, c, 60_000);
    expect(extended!.getTime()).toBeGreaterThan(Date.now() + 50_000);
    await t.admin.query(`update "${t.schema}".jobs set lease_expires_at = now() - interval '1 second' where id = $1`, [c.id]);
    expect(await extendLease(t, c, 60_000)).toBeNull();
  });

  it("refuses a success that arrives after the lease expired", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, short, {}, { queue });
    const c = (await claimOne(queue))!;
    expect(await expireLeases(t, "id = $1", [c.id])).toBe(1);
    expect((await completeJobs(t, [c])).size).toBe(0);
    expect(await row(id)).toMatchObject({ status: "running" });
  });

  it("settles a batch in one call and reports exactly the ones it changed", async () => {
    const queue = freshQueue();
    await enqueueJobs(t, Array.from({ length: 50 }, (_, n) => job(noop, { n }, { queue })));
    const jobs: ClaimedJob[] = await claimJobs(t, { queue, runnerId: "r", limit: 50, maxLeaseMs: 60_000 });
    const stale = jobs.slice(0, 5).map((j) => ({ ...j, leaseToken: "00000000-0000-4000-8000-000000000000" }));
    const done = await completeJobs(t, [...stale, ...jobs.slice(5, 30)]);
    expect(done.size).toBe(25);
    const failed = await failJobs(t, jobs.slice(30).map((j) => ({ ...j, outcome: "failed" as const, error: "e", retryDelayMs: 0 })));
    expect(failed.size).toBe(20);
    const { rows } = await t.admin.query(
      `select status::text, count(*)::int as n from "${t.schema}".jobs where queue = $1 group by 1 order by 1`,
      [queue],
    );
    expect(rows).toEqual([
      { status: "queued", n: 20 },
      { status: "running", n: 5 },
      { status: "succeeded", n: 25 },
    ]);
  });
});

/**
 * The claim, the settle and the enqueue go by name to a pool of Leasehold's
 * own (`hotQuery`, shared/db/db.ts): Postgres parses each once a connection
 * and stops planning it once its plans agree. Anything else is sent text.
 */
describe.each(drivers)("the claim, the settle and the enqueue as prepared statements (%s driver)", (driver) => {
  // Each test on a pool of one connection of its own: what it has prepared is what the next statement finds.
  let t: TestDb;
  beforeEach(async () => {
    t = await createTestDb(driver, 1);
  });
  afterEach(() => t.drop());

  // Jobs enqueued on another pool's connections: what t.db has prepared is then the claim and the settle alone.
  const enqueueAside = (specs: Parameters<typeof enqueueJobs>[1]) => enqueueJobs({ db: t.admin, schema: t.schema }, specs);
  const prepared = async () =>
    (await t.db.query<{ name: string; statement: string; generic_plans: string }>("select name, statement, generic_plans from pg_prepared_statements order by name")).rows;
  const drain = async (queue: string, jobs: number, batch: number) => {
    await enqueueAside(Array.from({ length: jobs }, (_, n) => job(noop, { n }, { queue })));
    for (;;) {
      const claimed = await claimJobs(t, { queue, runnerId: "r", limit: batch, maxLeaseMs: 60_000, fair: false });
      if (claimed.length === 0) return;
      expect((await completeJobs(t, claimed.map(({ id, leaseToken }) => ({ id, leaseToken })))).size).toBe(claimed.length);
    }
  };
  const succeeded = async (queue: string) =>
    (await t.admin.query<{ n: number }>(`select count(*)::int as n from "${t.schema}".jobs where queue = $1 and status = 'succeeded'`, [queue])).rows[0]!.n;

  it.each([1, 2])("are prepared once on the connection, and each one's plan is kept after a few (batches of %i)", async (batch) => {
    // A table the planner knows to be large, as a live queue's is: there a custom plan for one job costs far
    // less than a generic one's guess of ten, and a settle read bare arrays was planned again on every run.
    await enqueueAside(Array.from({ length: 40_000 }, (_, n) => job(noop, { n }, { queue: "elsewhere" })));
    await t.admin.query(`analyze "${t.schema}".jobs`);
    await drain("named", 20 * batch, batch);
    const names = await prepared();
    // The plain claim and the success settle: each prepared once, both named by their text's hash.
    expect(names).toHaveLength(2);
    for (const { name } of names) expect(name).toMatch(/^lh_[0-9a-z]+$/);
    expect(await succeeded("named")).toBe(20 * batch);
    // Twenty claims and twenty settles: after five custom plans, Postgres replays the generic one, the settle's too,
    // although a custom plan that saw a batch of one would cost less than the generic one's guess of ten.
    for (const { statement, generic_plans } of names) expect(Number(generic_plans), statement.slice(0, 40)).toBeGreaterThanOrEqual(15);
  });

  it("are sent by name by a runner, whose settles run under a write deadline on a connection of their own", async () => {
    const queue = "runner";
    await enqueueAside(Array.from({ length: 30 }, (_, n) => job(noop, { n }, { queue })));
    const summary = await runWorker({
      linger: "fixed", store: t, registry: createRegistry([noop]), queues: [queue], runnerId: "w", slots: 2, idleMs: 100, pollMs: 20, bell: false, fair: false,
    });
    expect(summary).toMatchObject({ claimed: 30, succeeded: 30 });
    // The claim and the success settle (a start is marked only for a handler that runs 50 ms).
    const texts = [CLAIMS.plain.unlimited, settleStatement(["succeeded"], [PARTS.succeeded.values([])], false, false)].map((text) => sql(t.schema, text));
    expect((await prepared()).map((n) => n.statement).sort()).toEqual(texts.sort());
  });

  it("take the enqueue's statements too: one job (a route's), a batch, a follow-up, each planned generic after a few", async () => {
    for (let n = 0; n < 20; n++) await enqueue(t, noop, { n }, { queue: "one" });
    for (let n = 0; n < 20; n++) await enqueueJobs(t, [job(noop, { n }, { queue: "many" }), job(noop, { n }, { queue: "many" })]);
    for (let n = 0; n < 20; n++) await enqueueFollowUp(t, job(noop, { n }, { queue: "follow" }), "r", { names: [noop.name], maxLeaseMs: 60_000 });
    const names = await prepared();
    expect(names.map((n) => n.statement).sort()).toEqual([INSERT_ONE, INSERT_JOBS, INSERT_FOLLOW_UP].map((text) => sql(t.schema, text)).sort());
    for (const { statement, generic_plans } of names) expect(Number(generic_plans), statement.slice(0, 60)).toBeGreaterThanOrEqual(15);
    const { rows } = await t.admin.query<{ queue: string; status: string; n: number }>(
      `select queue, status::text, count(*)::int as n from "${t.schema}".jobs group by 1, 2 order by 1, 2`);
    expect(rows).toEqual([
      { queue: "follow", status: "running", n: 20 },
      { queue: "many", status: "queued", n: 40 },
      { queue: "one", status: "queued", n: 20 },
    ]);
  });

  it("go as text to anything but Leasehold's own pool", async () => {
    const wrapped = { db: { query: t.db.query.bind(t.db) } as typeof t.db, schema: t.schema };
    await enqueueAside([job(noop, { n: 1 }, { queue: "wrapped" })]);
    const [claimed] = await claimJobs(wrapped, { queue: "wrapped", runnerId: "r", limit: 1, maxLeaseMs: 60_000, fair: false });
    expect((await completeJobs(wrapped, [{ id: claimed!.id, leaseToken: claimed!.leaseToken }])).size).toBe(1);
    expect(await prepared()).toEqual([]);
  });

  it("fall back to text, and stay text, when the connection lost them (a pooler that keeps none)", async () => {
    await drain("lost", 4, 2);
    expect(await prepared()).toHaveLength(2);
    // The driver still believes them prepared: its next claim finds no such statement (26000), as through PgBouncer in
    // transaction mode on another server connection.
    await t.db.query("deallocate all");
    await drain("lost", 6, 2);
    expect(await prepared()).toEqual([]);
    expect(await succeeded("lost")).toBe(10);
  });

  it("fall back to text when a migration changed what a prepared claim returns (0A000)", async () => {
    await drain("migrated", 2, 2);
    expect(await prepared()).toHaveLength(2);
    // A column the claim returns changes type under it: its cached plan can no longer be used.
    await t.admin.query(`alter table "${t.schema}".jobs alter column payload type json using payload::json`);
    await drain("migrated", 4, 2);
    expect(await succeeded("migrated")).toBe(6);
    expect(await prepared()).toEqual([]);
  });

  it("run as text, once each, when the server has their name prepared already (42P05)", async () => {
    const queue = "taken";
    await enqueueAside(Array.from({ length: 3 }, (_, n) => job(noop, { n }, { queue })));
    // Another client of a pooler's server connection prepared a statement of that name first.
    await t.db.query(`prepare ${statementName(sql(t.schema, CLAIMS.plain.limited))} as select 1`);
    const claimed = await claimJobs(t, { queue, runnerId: "r", limit: 3, maxLeaseMs: 60_000, fair: false });
    expect(claimed).toHaveLength(3);
    expect((await completeJobs(t, claimed.map(({ id, leaseToken }) => ({ id, leaseToken })))).size).toBe(3);
    const { rows } = await t.admin.query<{ attempts: number }>(`select attempts from "${t.schema}".jobs where queue = $1`, [queue]);
    expect(rows.map((r) => r.attempts)).toEqual([1, 1, 1]);
    // The pool dropped the connection whose statement failed; on its new one the settle was sent as text too.
    expect(await prepared()).toEqual([]);
  });
});
