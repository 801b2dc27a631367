import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import pg from "pg";
import {
  chargedAttempts, chargedAttemptsSql, endsDeadSql, isLastAttempt, lastAttemptSql, retryOrDead, startsFirstSql,
} from "../shared/lifecycle/attempt-rules.ts";
import { claimJobs, suspectWaiting } from "../shared/lifecycle/claim.ts";
import type { Queryable } from "../shared/db/db.ts";
import { nextDue } from "../shared/scheduler/due.ts";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { rescueExpiredLeases } from "../shared/lifecycle/rescue.ts";
import { settleJobs } from "../shared/lifecycle/settle.ts";
import { isTransient } from "../shared/runner/transient.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { createTestDb, databaseUrl, type TestDb } from "./support/db.ts";

/**
 * Rules the mutation audit of issue 23 found unguarded (or guarded only by a
 * slow end-to-end run), each tested where it is written: break the rule in
 * its one place and the test below it fails.
 */

const work = defineJob({ name: "rules.work", schema: z.object({}), handler: () => {}, maxAttempts: 3, backoffMs: 0, leaseMs: 60_000 });
const other = defineJob({ name: "rules.other", schema: z.object({}), handler: () => {}, backoffMs: 0, leaseMs: 60_000 });

describe("the rules the mutation audit found unguarded", () => {
  let t: TestDb;
  let queueNo = 0;
  const freshQueue = () => `rules${queueNo++}`;
  beforeAll(async () => {
    t = await createTestDb("pg", 6);
  });
  afterAll(() => t.drop());

  const row = async (id: string) =>
    (await t.admin.query<any>(`select *, lease_token::text as token from "${t.schema}".jobs where id = $1`, [id])).rows[0]!;
  /** The runner holding `id` has died: its lease is over (the database's clock, moved for this job only). */
  const expireLease = (id: string) =>
    t.admin.query(`update "${t.schema}".jobs set lease_expires_at = now() - interval '1 millisecond' where id = $1`, [id]);

  it("records the last attempt's start before its handler runs: after two charged deaths the claim says start first", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, work, {}, { queue });
    const firstFlags: boolean[] = [];
    for (let death = 1; death <= 2; death++) {
      const [c] = await claimJobs(t, { queue, runnerId: `dies-${death}`, limit: 1, maxLeaseMs: 60_000 });
      expect(c, `claim ${death}`).toBeDefined();
      firstFlags.push(c!.startFirst);
      // Its start reached the database, then the runner died: the death is charged.
      expect((await settleJobs(t, { started: [c!] })).started.has(id)).toBe(true);
      await expireLease(id);
      expect(await rescueExpiredLeases(t)).toMatchObject({ rescued: 1, refunded: 0 });
    }
    expect(await row(id)).toMatchObject({ attempts: 2, owes_attempt: false, start_first: false, suspect: true });
    const [last] = await claimJobs(t, { queue, runnerId: "last", limit: 1, maxLeaseMs: 60_000, suspects: true });
    expect(last).toMatchObject({ attempts: 3, maxAttempts: 3 });
    // Attempts 1 and 2 record their start lazily; the last one must not, or a
    // death before that write is refunded and the job starts a fourth time.
    expect([...firstFlags, last!.startFirst]).toEqual([false, false, true]);
  });

  it("a start mark under a lost lease marks nothing: the new holder's claim stays unstarted", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, work, {}, { queue });
    const [lost] = await claimJobs(t, { queue, runnerId: "lost", limit: 1, maxLeaseMs: 60_000 });
    await expireLease(id);
    expect(await rescueExpiredLeases(t)).toMatchObject({ refunded: 1 });
    const [holder] = await claimJobs(t, { queue, runnerId: "holder", limit: 1, maxLeaseMs: 60_000 });
    expect(holder!.leaseToken).not.toBe(lost!.leaseToken);
    // The runner that lost its lease writes its (late) start mark.
    expect((await settleJobs(t, { started: [lost!] })).started.size).toBe(0);
    expect(await row(id)).toMatchObject({ status: "running", runner_id: "holder", handler_started: false, token: holder!.leaseToken });
    // So the holder's death is still refunded, not charged for a start that never happened there.
    await expireLease(id);
    expect(await rescueExpiredLeases(t)).toMatchObject({ refunded: 1, rescued: 0 });
    expect(await row(id)).toMatchObject({ attempts: 0 });
  });

  it("the scheduler's next-due time includes a running job's lease, so an expired lease is seen at once", async () => {
    const fresh = await createTestDb("pg", 2);
    try {
      const queue = "due";
      const can = { maxLeaseMs: new Map([[queue, 60_000]]), names: [work.name] };
      const { id } = await enqueue(fresh, work, {}, { queue });
      const [held] = await claimJobs(fresh, { queue, runnerId: "r", limit: 1, maxLeaseMs: 60_000 });
      expect(held).toBeDefined();
      // Nothing queued: only the lease can make the system due.
      const running = await nextDue(fresh, can);
      expect(running.runAt).toBeNull();
      const lease = (await fresh.admin.query<{ at: Date }>(`select lease_expires_at as at from "${fresh.schema}".jobs where id = $1`, [id])).rows[0]!.at;
      expect(running.leaseExpiresAt?.getTime()).toBe(lease.getTime());
      expect(running.leaseExpiresAt!.getTime()).toBeGreaterThan(running.now.getTime());
      // The runner died: the lease is over, and next-due says so now, not at the daily rescue.
      await fresh.admin.query(`update "${fresh.schema}".jobs set lease_expires_at = now() - interval '1 millisecond' where id = $1`, [id]);
      const expired = await nextDue(fresh, can);
      expect(expired.leaseExpiresAt).not.toBeNull();
      expect(expired.leaseExpiresAt!.getTime()).toBeLessThanOrEqual(expired.now.getTime());
    } finally {
      await fresh.drop();
    }
  });

  it("a backend terminated mid-query (pg_terminate_backend) fails with 57P01, which the runner retries", async () => {
    const victim = new pg.Client({ connectionString: databaseUrl() });
    victim.on("error", () => {});
    await victim.connect();
    try {
      const pid = (await victim.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;
      // Terminated mid-query whatever the machine's load: the backend is sent
      // the signal from inside the statement it is running, then sleeps in it.
      const running = victim.query("select pg_terminate_backend($1), pg_sleep(30)", [pid]).then(() => null, (err: unknown) => err);
      const err = (await running) as { code?: string } | null;
      expect(err?.code).toBe("57P01");
      expect(isTransient(err)).toBe(true);
    } finally {
      await victim.end().catch(() => {});
    }
  });

  it("claims only the job types it is given, in every claim statement, and leaves the others uncharged", async () => {
    const variants = [
      { fair: true, limited: true }, { fair: true, limited: false }, { fair: false, limited: true }, { fair: false, limited: false },
    ];
    for (const v of variants) {
      const queue = freshQueue();
      const theirs = await enqueue(t, other, {}, { queue, priority: 10 });
      const mine = await enqueue(t, work, {}, { queue });
      const claimed = await claimJobs(t, { queue, runnerId: "r", limit: 10, maxLeaseMs: 60_000, names: [work.name], ...v });
      expect(claimed.map((c) => c.id), JSON.stringify(v)).toEqual([mine.id]);
      expect(await row(theirs.id)).toMatchObject({ status: "queued", attempts: 0, runs: 0 });
    }
    // Suspects too: a suspect of another type is neither claimed nor reported waiting.
    const queue = freshQueue();
    const suspect = await enqueue(t, other, {}, { queue });
    await t.admin.query(`update "${t.schema}".jobs set suspect = true where id = $1`, [suspect.id]);
    expect(await claimJobs(t, { queue, runnerId: "r", limit: 10, maxLeaseMs: 60_000, names: [work.name], suspects: true })).toEqual([]);
    expect(await suspectWaiting(t, [queue], 60_000, [work.name])).toBe(false);
    expect(await suspectWaiting(t, [queue], 60_000, [other.name])).toBe(true);
    expect(await row(suspect.id)).toMatchObject({ status: "queued", attempts: 0 });
  });

  it("a claimer passes over a job another claimer is taking, without waiting for it, and never takes it too", async () => {
    for (const fair of [true, false]) {
      const queue = freshQueue();
      const first = await enqueue(t, work, {}, { queue, priority: 5 });
      const second = await enqueue(t, work, {}, { queue });
      // Claimer A's claim is in an open transaction: it holds the first job's row lock, not yet committed.
      const a = new pg.Client({ connectionString: databaseUrl() });
      const b = new pg.Client({ connectionString: databaseUrl() });
      await Promise.all([a.connect(), b.connect()]);
      try {
        await a.query("begin");
        const held = await claimJobs({ db: a as unknown as Queryable, schema: t.schema }, { queue, runnerId: "a", limit: 1, maxLeaseMs: 60_000, fair });
        expect(held.map((j) => j.id)).toEqual([first.id]);
        // Claimer B would wait on that lock without `skip locked`: its lock_timeout turns the wait into an error.
        await b.query("set lock_timeout = '3s'");
        const taken = await claimJobs({ db: b as unknown as Queryable, schema: t.schema }, { queue, runnerId: "b", limit: 2, maxLeaseMs: 60_000, fair });
        expect(taken.map((j) => j.id), `fair: ${fair}`).toEqual([second.id]);
        await a.query("commit");
      } finally {
        await a.query("rollback").catch(() => {});
        await Promise.all([a.end(), b.end()]);
      }
      expect(await row(first.id)).toMatchObject({ status: "running", runner_id: "a", attempts: 1 });
      expect(await row(second.id)).toMatchObject({ status: "running", runner_id: "b", attempts: 1 });
    }
  });

  it("writes a start that must come first before the handler runs", async () => {
    // The database answers start marks late, as over a slow link: after 20
    // other round trips to it (the time a handler takes to start and read its
    // row many times over, whatever the load). A handler started before its
    // mark landed would see it unwritten.
    const slowMarks: Queryable = {
      query: async (text, values) => {
        if (text.includes("handler_started = true")) for (let i = 0; i < 20; i++) await t.admin.query("select 1");
        return t.db.query(text, values);
      },
    };
    const queue = freshQueue();
    const seen: boolean[] = [];
    const type = defineJob({
      name: "rules.first", schema: z.object({}), queue, maxAttempts: 1, leaseMs: 10_000, backoffMs: 0,
      handler: async (_p, ctx) => {
        seen.push((await row(ctx.jobId)).handler_started);
      },
    });
    // maxAttempts 1: its only attempt is its last, so its start is recorded first.
    const { id } = await enqueue(t, type, {}, { queue });
    const summary = await runWorker({
      linger: "fixed",
      store: { db: slowMarks, schema: t.schema }, registry: createRegistry([type]), queues: [queue], runnerId: "w", slots: 2, idleMs: 200, pollMs: 20,
    });
    expect(summary.succeeded).toBe(1);
    expect(seen).toEqual([true]);
    expect(await row(id)).toMatchObject({ status: "succeeded", attempts: 1 });
  });

  it("the attempt rules say the same in SQL as in TypeScript (shared/lifecycle/attempt-rules.ts)", async () => {
    const cases = [];
    for (let max = 1; max <= 3; max++)
      for (let attempts = 0; attempts <= max; attempts++)
        for (const owes of [false, true])
          for (const startFirst of [false, true])
            for (const permanent of [false, true]) cases.push({ max, attempts, owes, startFirst, permanent });
    const { rows } = await t.admin.query<{ charged: number; last: boolean; first: boolean; dead: boolean }>(
      `select ${chargedAttemptsSql("j")} as charged, ${lastAttemptSql("j.attempts", "j.max_attempts")} as last,
              ${startsFirstSql("j.")} as first, ${endsDeadSql("j", "j.permanent")} as dead
       from unnest($1::integer[], $2::integer[], $3::boolean[], $4::boolean[], $5::boolean[])
         with ordinality as j(max_attempts, attempts, owes_attempt, start_first, permanent, n) order by n`,
      [cases.map((c) => c.max), cases.map((c) => c.attempts), cases.map((c) => c.owes), cases.map((c) => c.startFirst), cases.map((c) => c.permanent)],
    );
    const expected = cases.map((c) => {
      const charged = chargedAttempts(c.attempts, c.owes, c.max);
      return {
        charged, last: isLastAttempt(c.attempts, c.max), first: c.startFirst || isLastAttempt(c.attempts, c.max),
        dead: retryOrDead(charged, c.max, c.permanent) === "dead",
      };
    });
    expect(rows).toEqual(expected);
    // The rules themselves, at their edges.
    expect([chargedAttempts(2, true, 3), chargedAttempts(3, true, 3), chargedAttempts(1, false, 3)]).toEqual([3, 3, 1]);
    expect([isLastAttempt(2, 3), isLastAttempt(3, 3)]).toEqual([false, true]);
    expect([retryOrDead(2, 3), retryOrDead(3, 3), retryOrDead(1, 3, true)]).toEqual(["retry", "dead", "dead"]);
  });
});
