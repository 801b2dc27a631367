import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { defineJob } from "../shared/jobs/job.ts";
import { releaseJobs } from "../shared/lifecycle/settle.ts";
import { createTestDb, drivers, type TestDb } from "./support/db.ts";
import { noop } from "./support/jobs.ts";

const other = defineJob({ name: "other", schema: z.object({ n: z.number() }), handler: () => {} });
const unfair = defineJob({ name: "unfair", schema: z.object({ n: z.number() }), handler: () => {}, fair: false });

describe.each(drivers)("fair claiming (%s driver)", (driver) => {
  let t: TestDb;
  let queueNo = 0;
  /** Each test works in a queue of its own. */
  const freshQueue = () => `f${queueNo++}`;
  beforeAll(async () => {
    t = await createTestDb(driver, 4);
  });
  afterAll(() => t.drop());

  const many = (queue: string, group: string | undefined, n: number, priority = 0) =>
    enqueueJobs(t, Array.from({ length: n }, (_, i) => job(noop, { n: i }, { queue, group, priority })));
  const claim = (queue: string, limit: number, extra: { fair?: boolean; names?: string[] } = {}) =>
    claimJobs(t, { queue, runnerId: "r", limit, maxLeaseMs: 60_000, ...extra });

  it("claims every small group's job first, even behind 1,000 of a big group's", async () => {
    const queue = freshQueue();
    await many(queue, "big", 1_000);
    const small = (await Promise.all(["s1", "s2", "s3", "s4", "s5"].map((g) => many(queue, g, 1)))).flat().map((j) => j.id);
    const claimed = await claim(queue, 10);
    expect(claimed).toHaveLength(10);
    // One job of every group first, in turn; the big group fills the rest.
    expect(claimed.slice(0, 6).map((j) => j.id)).toEqual(expect.arrayContaining(small));
  });

  it("a queue that showed one group is claimed in plain order, and a new group gets its share at the next claim", async () => {
    const queue = freshQueue();
    const big = await many(queue, "big", 200);
    expect(await claim(queue, 5)).toHaveLength(5); // a fair claim: one group seen
    expect((await claim(queue, 5)).map((j) => j.id)).toEqual(big.slice(5, 10).map((j) => j.id)); // plain order
    const [small] = await many(queue, "small", 1);
    const next = await claim(queue, 5); // the plain claim sees the new group, picks nothing; the fair claim follows
    expect(next).toHaveLength(5);
    expect(next.slice(0, 2).map((j) => j.id)).toContain(small!.id);
  });

  it("claims of one job take the groups in turn: the group count is not read from the claim's size", async () => {
    const queue = freshQueue();
    await many(queue, "big", 100);
    expect(await claim(queue, 1)).toHaveLength(1); // one group seen
    expect(await claim(queue, 1)).toHaveLength(1); // plain
    const small = (await Promise.all(["s1", "s2", "s3"].map((g) => many(queue, g, 2)))).flat().map((j) => j.id);
    // Four groups wait; in four claims of one job, each group gets one.
    const claimed: string[] = [];
    for (let i = 0; i < 4; i++) claimed.push(...(await claim(queue, 1)).map((j) => j.id));
    expect(claimed).toHaveLength(4);
    expect(claimed.filter((id) => small.includes(id))).toHaveLength(3);
    // And on: two claims of two jobs serve the three small groups' second jobs and the big group again.
    const more = [...(await claim(queue, 2)), ...(await claim(queue, 2))].map((j) => j.id);
    expect(more.filter((id) => small.includes(id))).toHaveLength(3);
  });

  it("claims of one job in a queue of several groups take one statement each: the groups are counted beyond the claim's size", async () => {
    const queue = freshQueue();
    await many(queue, "big", 50);
    await many(queue, "small", 50);
    let statements = 0;
    const counted = { schema: t.schema, db: { query: ((text: string, values?: unknown[]) => (statements++, t.db.query(text, values))) as typeof t.db.query } };
    for (let i = 0; i < 10; i++) expect(await claimJobs(counted, { queue, runnerId: "r", limit: 1, maxLeaseMs: 60_000 })).toHaveLength(1);
    expect(statements).toBe(10);
  });

  it("without fairness (a queue that opts out) the big backlog comes first", async () => {
    const queue = freshQueue();
    await many(queue, "big", 100);
    const [smallJob] = await many(queue, "small", 1);
    const claimed = await claim(queue, 10, { fair: false });
    expect(claimed).toHaveLength(10);
    expect(claimed.map((j) => j.id)).not.toContain(smallJob!.id);
  });

  it("orders each group by priority, and takes the groups in turn", async () => {
    const queue = freshQueue();
    const [aLow] = await many(queue, "a", 1, 0);
    const [aHigh] = await many(queue, "a", 1, 5);
    const [bOnly] = await many(queue, "b", 1, -3);
    const claimed = (await claim(queue, 3)).map((j) => j.id);
    expect(new Set(claimed.slice(0, 2))).toEqual(new Set([aHigh!.id, bOnly!.id]));
    expect(claimed[2]).toBe(aLow!.id);
  });

  it("shares ungrouped jobs as one group of their own", async () => {
    const queue = freshQueue();
    await many(queue, "big", 200);
    const ungrouped = await many(queue, undefined, 3);
    const claimed = (await claim(queue, 4)).map((j) => j.id);
    expect(claimed.filter((id) => ungrouped.some((u) => u.id === id))).toHaveLength(2);
  });

  it("claims a job type that opts out in the ungrouped share, whatever its group", async () => {
    const queue = freshQueue();
    await many(queue, "big", 50);
    const optedOut = await enqueueJobs(t, ["x", "y", "z"].map((g, n) => job(unfair, { n }, { queue, group: g })));
    const { rows } = await t.admin.query<{ group_key: string; fair_group: string }>(
      `select group_key, fair_group from "${t.schema}".jobs where id = $1`, [optedOut[0]!.id]);
    expect(rows[0]).toEqual({ group_key: "x", fair_group: "" });
    // Two shares (big, and the ungrouped one), not four.
    const claimed = (await claim(queue, 4)).map((j) => j.id);
    expect(claimed.filter((id) => optedOut.some((o) => o.id === id))).toHaveLength(2);
  });

  it("serves more groups than one claim can take, in turn, claim after claim", async () => {
    const queue = freshQueue();
    const groups = Array.from({ length: 30 }, (_, g) => `g${String(g).padStart(2, "0")}`);
    for (const g of groups) await many(queue, g, 3);
    const { rows } = await t.admin.query<{ id: string; group_key: string }>(
      `select id::text, group_key from "${t.schema}".jobs where queue = $1`, [queue]);
    const groupOf = new Map(rows.map((r) => [r.id, r.group_key]));
    const seen = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const claimed = await claim(queue, 10);
      const claimedGroups = claimed.map((j) => groupOf.get(j.id)!);
      expect(new Set(claimedGroups).size).toBe(10);
      for (const g of claimedGroups) seen.add(g);
    }
    expect(seen.size).toBe(30);
  });

  it("claims only the job types named, when named", async () => {
    const queue = freshQueue();
    await many(queue, "a", 3);
    const mine = await enqueue(t, other, { n: 1 }, { queue, group: "a" });
    expect((await claim(queue, 10, { names: ["other"] })).map((j) => j.id)).toEqual([mine.id]);
    expect(await claim(queue, 10, { names: [] })).toEqual([]);
  });

  it("counts the run and clears the start mark, and a release keeps the run's number", async () => {
    const queue = freshQueue();
    const { id } = await enqueue(t, noop, { n: 1 }, { queue, group: "g" });
    await t.admin.query(`update "${t.schema}".jobs set handler_started = true, start_first = true where id = $1`, [id]);
    const first = (await claim(queue, 1))[0]!;
    expect(first).toMatchObject({ id, attempts: 1, run: 1, startFirst: true });
    const { rows } = await t.admin.query(`select runs, handler_started from "${t.schema}".jobs where id = $1`, [id]);
    expect(rows[0]).toEqual({ runs: 1, handler_started: false });
    await releaseJobs(t, [first]);
    expect((await claim(queue, 1))[0]).toMatchObject({ id, attempts: 1, run: 2 });
  });
});

describe("the fair claim's cost (pg driver)", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 2);
  });
  afterAll(() => t.drop());

  /** Pages the claim touches, rolled back. */
  async function claimBuffers(queue: string): Promise<{ buffers: number; plan: string; seqScans: string[] }> {
    const { CLAIMS } = await import("../shared/lifecycle/claim-sql.ts");
    const CLAIM_FAIR = CLAIMS.fair.limited;
    const { sql } = await import("../shared/db/db.ts");
    const client = await t.admin.connect();
    try {
      await client.query("begin");
      const { rows } = await client.query<{ "QUERY PLAN": any[] }>(
        `explain (analyze, buffers, format json) ${sql(t.schema, CLAIM_FAIR)}`, [queue, 20, 60_000, "r", null, "", 4]);
      await client.query("rollback");
      const top = rows[0]!["QUERY PLAN"][0];
      const seqScans: string[] = [];
      const walk = (p: any) => {
        if (p["Node Type"] === "Seq Scan") seqScans.push(p["Relation Name"]);
        for (const c of p.Plans ?? []) walk(c);
      };
      walk(top.Plan);
      return { buffers: top.Plan["Shared Hit Blocks"] + top.Plan["Shared Read Blocks"], plan: JSON.stringify(top.Plan), seqScans };
    } finally {
      client.release();
    }
  }

  it("reads about as many pages behind 100,000 queued jobs as behind 1,000: it walks groups, not the backlog", async () => {
    // In slices of 10,000 rows: each insert stays well inside the pool's query timeout on a loaded host.
    for (const [queue, backlog] of [["small", 1_000], ["large", 100_000]] as const) {
      for (let from = 1; from <= backlog; from += 10_000) {
        await t.admin.query(
          `insert into "${t.schema}".jobs (queue, name, payload, max_attempts, lease_ms, backoff_ms, group_key, fair_group)
           select $1::text, 'noop', '{"n":1}', 3, 30000, 0, g, g
           from generate_series($2::int, $3::int) i, lateral (select case when i <= 8 then 't' || i else 'big' end as g) x`,
          [queue, from, Math.min(backlog, from + 9_999)]);
      }
    }
    await t.admin.query(`vacuum analyze "${t.schema}".jobs`);
    // The least of two runs: the first may also set hint bits, or meet autovacuum.
    const least = async (queue: string) => {
      const [a, b] = [await claimBuffers(queue), await claimBuffers(queue)];
      return a.buffers <= b.buffers ? a : b;
    };
    const small = await least("small");
    const large = await least("large");
    // Each group's jobs are read by due_jobs (migration 0018), one range of jobs_fair_ready_idx a priority.
    expect(large.plan).toContain('"Function Name":"due_jobs"');
    expect(large.seqScans).not.toContain("jobs");
    expect(large.buffers).toBeLessThan(small.buffers * 1.5 + 20);
  });
});
