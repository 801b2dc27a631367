import { createRequire } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import type { Pool, Queryable } from "../shared/db/db.ts";
import { sql } from "../shared/db/db.ts";
import { enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { CLAIMS } from "../shared/lifecycle/claim-sql.ts";
import { completeJobs, settleJobs } from "../shared/lifecycle/settle.ts";
import { MAX_PREFETCH } from "../shared/runner/prefetch.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { nextDue } from "../shared/scheduler/due.ts";
import { countReady } from "../shared/observe/stats.ts";
import { createTestDb, type TestDb } from "./support/db.ts";

const { escapeLiteral, prepareValue } = createRequire(import.meta.url)("pg/lib/utils.js") as {
  escapeLiteral(text: string): string;
  prepareValue(value: unknown): unknown;
};

/**
 * Postgres compiles a statement to machine code (JIT) when its estimated cost
 * passes `jit_above_cost` (100,000 by default, and JIT is on by default):
 * tens of milliseconds of compiling for a claim that runs in a few. The fair
 * claim's estimate used to grow with the table (a guessed 67 groups times
 * each group's share), so behind a backlog of later jobs every fair claim
 * paid about 80 ms of JIT (issue 24: execute behind 1,000,000 later jobs ran
 * at 0.72× the 10,000 figure). Every statement the runner and a large
 * enqueue send must stay well below that line, behind a big table, at the
 * largest batch the runner asks for.
 */

const BACKLOG = 200_000;
const queue = "costs";
const payload = z.object({ i: z.number().int() });
const plain = defineJob({ name: "plain", schema: payload, queue, handler: () => {} });

describe(`statements planned behind ${BACKLOG.toLocaleString("en-US")} later jobs stay far below the JIT threshold`, () => {
  let t: TestDb;
  let ceiling: number;
  const sent: { text: string; values: unknown[] }[] = [];
  /** The store's pool, recording every statement sent through it. */
  const recording = (pool: Queryable): Queryable => ({
    ...pool,
    query: ((text: string, values?: unknown[]) => (sent.push({ text, values: values ?? [] }), pool.query(text, values))) as Queryable["query"],
  });
  const cost = async (text: string, values: unknown[]) => {
    const { rows } = await t.admin.query<{ "QUERY PLAN": { Plan: { "Total Cost": number } }[] }>(`explain (format json) ${text}`, values);
    return rows[0]!["QUERY PLAN"][0]!.Plan["Total Cost"];
  };

  beforeAll(async () => {
    t = await createTestDb("pg", 4);
    // In slices of 20,000 rows: each insert stays well inside the pool's query timeout on a loaded host.
    for (let from = 1; from <= BACKLOG; from += 20_000) {
      await t.admin.query(
        `insert into "${t.schema}".jobs (queue, name, payload, run_at, max_attempts, lease_ms, backoff_ms)
         select $1::text, 'plain', jsonb_build_object('i', g), now() + interval '1 hour' + g * interval '50 milliseconds', 3, 30000, 1000
         from generate_series($2::int, $3::int) g`,
        [queue, from, Math.min(BACKLOG, from + 19_999)]);
    }
    await t.admin.query(`analyze "${t.schema}".jobs`);
    ceiling = Number((await t.admin.query<{ c: string }>("select current_setting('jit_above_cost') as c")).rows[0]!.c) / 4;
  }, 120_000);
  afterAll(() => t.drop());

  it("every claim, at the largest batch a runner asks for (fair, plain, suspects; with and without limits)", async () => {
    const costs: Record<string, number> = {};
    for (const [pick, variants] of Object.entries(CLAIMS)) {
      for (const [limits, text] of Object.entries(variants)) {
        // $6 and $7 as a fair claim after one group sends them: the whole batch is that group's share.
        const values = [queue, MAX_PREFETCH, 60_000, "r", null, "", pick === "fair" ? MAX_PREFETCH : null, ...(limits === "rated" ? [MAX_PREFETCH] : [])];
        costs[`${pick}/${limits}`] = await cost(sql(t.schema, text), values);
      }
    }
    expect(Object.keys(costs)).toHaveLength(9);
    expect(Object.entries(costs).filter(([, c]) => c > ceiling)).toEqual([]);
  });

  it("a plain claim in a fair queue asks once per statement whether another group waits: not again on each row another runner claimed meanwhile", async () => {
    // A One-Time Filter is evaluated again by every EvalPlanQual recheck (a row updated since the claim's snapshot, as
    // when runners claim the same head of a queue), and this one is two probes of jobs_fair_ready_idx: with 8 runners
    // draining 40,000 jobs, 0.19 probes a job against 0.004 with one runner. An InitPlan's value is kept by the recheck.
    const filters: string[] = [];
    const walk = (node: Record<string, unknown>) => {
      if (typeof node["One-Time Filter"] === "string") filters.push(node["One-Time Filter"]);
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    for (const pick of ["plain", "suspects"] as const) {
      for (const [limits, text] of Object.entries(CLAIMS[pick])) {
        const values = [queue, MAX_PREFETCH, 60_000, "r", null, "", null, ...(limits === "rated" ? [MAX_PREFETCH] : [])];
        const { rows } = await t.admin.query<{ "QUERY PLAN": { Plan: Record<string, unknown> }[] }>(`explain (verbose, format json) ${sql(t.schema, text)}`, values);
        const plan = rows[0]!["QUERY PLAN"][0]!.Plan;
        expect(JSON.stringify(plan), `${pick}/${limits}`).toContain("fair_group_before");
        walk(plan);
      }
    }
    expect(filters.filter((f) => f.includes("fair_group_"))).toEqual([]);
  });

  it("a claim reads pages for the due jobs it takes, not for those waiting for later", async () => {
    // Read as one ordered scan of jobs_ready_idx, a claim of more jobs than
    // are due walked every delayed entry of its queue: 200,000 here, about
    // 1,000 leaf pages; 100-200 ms a claim behind 1,000,000.
    const client = await t.admin.connect();
    try {
      await client.query("begin");
      // Planned as the ordered scan of jobs_ready_idx, as the claim is when
      // the statistics saw many jobs due (the bench's backlog phases); due
      // here: 5 at priority 0, 5 at -1, one suspect, and the claim asks for
      // MAX_PREFETCH.
      await client.query("set local enable_sort = off");
      // Sorting off costs every plan over the JIT threshold: compiling would only take time.
      await client.query("set local jit = off");
      await client.query(
        `insert into "${t.schema}".jobs (queue, name, payload, priority, suspect, max_attempts, lease_ms, backoff_ms)
         select $1::text, 'plain', jsonb_build_object('i', g), case when g <= 5 then 0 else -1 end, g = 11, 3, 30000, 1000
         from generate_series(1, 11) g`, [queue]);
      const read: Record<string, [claimed: number, pages: number]> = {};
      for (const [pick, variants] of Object.entries(CLAIMS)) {
        for (const [limits, text] of Object.entries(variants)) {
          const values = [queue, MAX_PREFETCH, 60_000, "r", null, pick === "plain" ? null : "", pick === "fair" ? MAX_PREFETCH : null, ...(limits === "rated" ? [MAX_PREFETCH] : [])];
          await client.query("savepoint claim");
          // Twice, each rolled back: the first use of a function in a session plans its statements (catalog pages).
          for (const pass of [1, 2]) {
            const plan = await explainIn(client, sql(t.schema, text), values, "custom");
            if (pass === 2) read[`${pick}/${limits}`] = [plan["Actual Rows"]!, plan["Shared Hit Blocks"]! + plan["Shared Read Blocks"]!];
            await client.query("rollback to savepoint claim");
          }
        }
      }
      expect(Object.keys(read)).toHaveLength(9);
      // Those pages are read by due_jobs' generic plans, its one plan per statement (migration 0019):
      // left to choose, Postgres planned them anew on every call, three quarters of the function's cost.
      const { rows: [fn] } = await client.query<{ proconfig: string[] }>(
        `select proconfig from pg_proc where oid = '"${t.schema}".due_jobs'::regproc`);
      expect(fn!.proconfig).toContain("plan_cache_mode=force_generic_plan");
      for (const [variant, [claimed, pages]] of Object.entries(read)) {
        expect(claimed, variant).toBe(variant.startsWith("suspects") ? 1 : 10);
        // Before due_jobs (migration 0018), on PostgreSQL 15 (CI runs this file on the machine's own too):
        // 1,131 pages (plain) to 2,134 (fair), against 161 to 221. PostgreSQL 18 skips through priorities itself.
        expect(pages, variant).toBeLessThan(400);
      }
    } finally {
      await client.query("rollback");
      client.release();
    }
  });

  it("every statement of a 10,000-job enqueue and of a runner draining 3,000 ready jobs", async () => {
    const store = { db: recording(t.db), schema: t.schema };
    await enqueueJobs(store, Array.from({ length: 3_000 }, (_, i) => job(plain, { i })));
    const enqueued = sent.length;
    await t.admin.query(`analyze "${t.schema}".jobs`);
    const summary = await runWorker({
      linger: "fixed", store, registry: createRegistry([plain]), queues: [queue], runnerId: "w", slots: 20, idleMs: 100, pollMs: 20,
    });
    expect(summary.succeeded).toBe(3_000);
    const byRunner = sent.splice(0).slice(enqueued);
    expect(byRunner.length).toBeGreaterThan(1);
    // The enqueue of 10,000 is explained, not run: only its plan is in question.
    const batch = Array.from({ length: 10_000 }, (_, i) => job(plain, { i }));
    const spy = { db: { ...t.db, query: ((text: string, values?: unknown[]) => (sent.push({ text, values: values ?? [] }), Promise.reject(new Error("explained only")))) as Queryable["query"] }, schema: t.schema };
    await expect(enqueueJobs(spy, batch)).rejects.toThrow("explained only");
    expect(enqueued).toBeGreaterThan(0);
    expect(sent.length).toBeGreaterThan(0);
    const over: string[] = [];
    for (const { text, values } of [...sent, ...byRunner]) {
      const c = await cost(text, values);
      if (c > ceiling) over.push(`${Math.round(c)}: ${text.replace(/\s+/g, " ").slice(0, 80)}`);
    }
    expect(over).toEqual([]);
  });

  it("the scheduler's questions, how many are due and when the next comes due: a few index pages, whatever waits for later", async () => {
    // Beside the backlog (priority 0, due in an hour), another queue: a due
    // job and a later one at a lower priority, a later one at a higher, and
    // the earliest later one of a type no runner serves.
    const other = "costs-due";
    await t.admin.query(
      `insert into "${t.schema}".jobs (queue, name, payload, priority, run_at, max_attempts, lease_ms, backoff_ms)
       select $1::text, n, '{}', p, now() + m * interval '1 minute', 3, 30000, 1000
       from (values ('plain', -1, 30), ('plain', -1, 0), ('plain', 5, 120), ('unserved', 0, 10)) v(n, p, m)`, [other]);
    sent.length = 0;
    const store = { db: recording(t.db), schema: t.schema };
    const can = { names: ["plain"], maxLeaseMs: new Map([[queue, 60_000], [other, 60_000]]) };
    const due = await nextDue(store, can);
    const minutes = (at: Date | null) => Math.round((at!.getTime() - due.now.getTime()) / 60_000) + 0;
    expect([minutes(due.runAt), minutes(due.laterAt)]).toEqual([0, 30]);
    expect(due.leaseExpiresAt).toBeNull();
    // Due now, or within two hours: the 200,000 of the backlog are counted up to the cap.
    expect(await countReady(store, can, 1_000)).toBe(1);
    expect(await countReady(store, can, 1_000, 2 * 3_600_000)).toBe(1_000);
    for (const { text, values } of sent.splice(0)) {
      const { rows } = await t.admin.query<{ "QUERY PLAN": { Plan: { "Shared Hit Blocks": number; "Shared Read Blocks": number } }[] }>(
        `explain (analyze, buffers, format json) ${text}`, values);
      const plan = rows[0]!["QUERY PLAN"][0]!.Plan;
      // The backlog's heap is over 4,000 pages, and the old next due time read
      // 6,899: each question here reads 10 to 30 (the count of 1,000 its rows).
      expect(plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]).toBeLessThan(100);
      // A count is costed by the limit checks of each due row the planner
      // expects it to pass, up to its cap (bench/levers.md, lever 20), so
      // after the analyze above (3,000 due) it is costed over the line with
      // or without a backlog: only the next due time is held to it here.
      if (values.length === 3) expect(await cost(text, values)).toBeLessThan(ceiling);
    }
  });
});

/**
 * A queue is mostly empty, and autovacuum analyzes a table only after enough
 * of it changed, so a burst of jobs is usually claimed under statistics taken
 * when the queue had none. The claim's probes for groups were planned from
 * those: the planner expected one queued row, and read jobs_ready_idx and
 * sorted, which is every queued job of the queue, twice a claim (issue 24:
 * 83 index tuples read a job in the scale-out drain). A claim must read
 * pages in proportion to what it claims, whatever the statistics say.
 */
describe("a claim under statistics that do not know the queue", () => {
  const BURST = 40_000;
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 2);
    // As the bench's fresh database had it: never analyzed (autovacuum kept off here, so it stays that way).
    await t.admin.query(`alter table "${t.schema}".jobs set (autovacuum_enabled = false)`);
    await t.admin.query(
      `insert into "${t.schema}".jobs (queue, name, payload, max_attempts, lease_ms, backoff_ms)
       select $1::text, 'plain', jsonb_build_object('i', g), 3, 30000, 1000 from generate_series(1, $2::int) g`,
      [queue, BURST]);
  }, 120_000);
  afterAll(() => t.drop());

  it.each(["custom", "generic"] as const)("reads a few pages, not the queue's, in every variant of the fair and plain claims, in its %s plan", async (planned) => {
    const pages: Record<string, number> = {};
    for (const pick of ["fair", "plain"] as const) {
      for (const [limits, text] of Object.entries(CLAIMS[pick])) {
        // As a runner of a fair queue sends them after a fair claim saw the one group of ungrouped jobs (''): planned
        // for these values, or for any, from the statistics the table has.
        const values = [queue, 10, 60_000, "r", null, "", pick === "fair" ? 10 : null, ...(limits === "rated" ? [10] : [])];
        const plan = await explainAnalyzed(t.admin, sql(t.schema, text), values, planned, "commit");
        // Each claim took its 10 jobs (the next one takes the next 10).
        expect(plan["Actual Rows"], `${pick}/${limits}`).toBe(10);
        pages[`${pick}/${limits}`] = plan["Shared Hit Blocks"]! + plan["Shared Read Blocks"]!;
      }
    }
    expect(Object.keys(pages)).toHaveLength(6);
    // A claim of 10 reads 110-180 pages (its updates, the indexes, the catalogs; on a connection's first claim also
    // those due_jobs plans its statements from, up to about 410); a probe that scans the queue's 40,000 jobs reads
    // about 900 more (1,900-2,800 a claim when the probes were planned inline from these statistics).
    expect(Object.entries(pages).filter(([, n]) => n > 500)).toEqual([]);
  });

  it("follows the statistics once the table is analyzed: due_jobs' generic plans are made again on the same connection", async () => {
    // A small group behind the burst: until the table is analyzed its share may be read through jobs_ready_idx with
    // the group as a filter (docs/internals.md, "Known limits"). A generic plan kept for the connection's life would
    // keep doing that; the analyze must end it.
    await enqueueJobs(t, Array.from({ length: 5 }, (_, i) => job(plain, { i }, { group: "small" })));
    const client = await t.admin.connect();
    try {
      const claim = async () => {
        await client.query("begin");
        const plan = await explainIn(client, sql(t.schema, CLAIMS.fair.unlimited), [queue, 10, 60_000, "r", null, "", 5], "custom");
        await client.query("rollback");
        expect(plan["Actual Rows"]).toBe(10);
        return plan["Shared Hit Blocks"]! + plan["Shared Read Blocks"]!;
      };
      await claim();
      await t.admin.query(`analyze "${t.schema}".jobs`);
      // 191-221 pages; through jobs_ready_idx, as without the analyze, 1,033 on PostgreSQL 15 and 1,017 on 18.
      expect(await claim()).toBeLessThan(500);
    } finally {
      client.release();
    }
  });
});

/** A plan node of `explain (analyze, buffers, format json)`, as far as these tests read it. */
type Node = {
  "Node Type": string; Operation?: string; "Relation Name"?: string; "Index Name"?: string;
  "Actual Rows"?: number; "Actual Loops"?: number; "Shared Hit Blocks"?: number; "Shared Read Blocks"?: number; Plans?: Node[];
};
const nodes = (n: Node): Node[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

/**
 * `explain (analyze, buffers)` of a statement, in a transaction of its own on one of `pool`'s connections that
 * `end`s it (a claim kept, or a settle rolled back before it runs for real): planned for these values (custom), or
 * once for any (generic, as Postgres replays a prepared statement once five plans agree).
 */
async function explainAnalyzed(
  pool: Pool, text: string, values: unknown[], planned: "custom" | "generic", end: "commit" | "rollback",
): Promise<Node> {
  const client = await pool.connect();
  try {
    await client.query("begin");
    const plan = await explainIn(client, text, values, planned);
    await client.query(end);
    return plan;
  } catch (err) {
    await client.query("rollback");
    throw err;
  } finally {
    // A prepared statement outlives the transaction it was made in.
    await client.query("deallocate all");
    client.release();
  }
}

async function explainIn(client: Queryable, text: string, values: unknown[], planned: "custom" | "generic"): Promise<Node> {
  if (planned === "custom") {
    const { rows } = await client.query<{ "QUERY PLAN": { Plan: Node }[] }>(`explain (analyze, buffers, format json) ${text}`, values);
    return rows[0]!["QUERY PLAN"][0]!.Plan;
  }
  await client.query("set local plan_cache_mode = force_generic_plan");
  await client.query(`prepare explained as ${text}`);
  // EXECUTE's arguments cannot be bound parameters: the values as literals, as the driver would send them.
  const literals = values.map((v) => (v === null ? "null" : escapeLiteral(String(prepareValue(v)))));
  const { rows } = await client.query<{ "QUERY PLAN": { Plan: Node }[] }>(
    `explain (analyze, buffers, verbose, format json) execute explained(${literals.join(", ")})`);
  const plan = rows[0]!["QUERY PLAN"][0]!.Plan;
  // A generic plan shows the parameters where a custom one shows the values (the settle's arrays, which it reads
  // through subqueries, only in the outputs `verbose` adds).
  expect(JSON.stringify(plan)).toMatch(/\$1\b/);
  return plan;
}

/** A schema of its own with `n` ready jobs, and no autovacuum to tidy the table or give it statistics behind the test's back. */
async function unvacuumedQueue(n: number): Promise<TestDb> {
  const t = await createTestDb("pg", 2);
  await t.admin.query(`alter table "${t.schema}".jobs set (autovacuum_enabled = false)`);
  await enqueueJobs(t, Array.from({ length: n }, (_, i) => job(plain, { i })));
  return t;
}

/**
 * The claim's update finds the jobs it took again. Joined to them on their
 * ids, it was planned two ways, each bad in one state of the table: under
 * statistics that call the table small (an analyzed queue of 10,000), the
 * whole table, every version of every row, was hashed to update 500 (half
 * the claim's time); with the ids as an array beside that join, a table
 * without statistics searched the whole array once for every job (25 ms for
 * a claim of 1,000 against 8.7). One scan of the primary key for all of
 * them is right in both.
 */
describe("a claim's update reads its jobs by one scan of the primary key, with or without statistics", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await unvacuumedQueue(10_000);
  }, 120_000);
  afterAll(() => t.drop());

  /** How the update of each claim variant reached the jobs it took, a claim of 1,000 rolled back. */
  const updateScans = async () => {
    const seen: Record<string, string[]> = {};
    for (const [pick, variants] of Object.entries(CLAIMS)) {
      // Suspects: none is queued here, so that claim takes nothing (its update is the same text as the plain one's).
      if (pick === "suspects") continue;
      for (const [limits, text] of Object.entries(variants)) {
        const values = [queue, 1_000, 60_000, "r", null, pick === "fair" ? "" : null, pick === "fair" ? 1_000 : null, ...(limits === "rated" ? [1_000] : [])];
        const plan = await explainAnalyzed(t.admin, sql(t.schema, text), values, "custom", "rollback");
        expect(plan["Actual Rows"], `${pick}/${limits}`).toBe(1_000);
        const update = nodes(plan).find((n) => n.Operation === "Update" && n["Relation Name"] === "jobs")!;
        // What under the update read the jobs table whole, or probed its primary key more than once.
        seen[`${pick}/${limits}`] = nodes(update).slice(1)
          .filter((n) => (n["Node Type"] === "Seq Scan" && n["Relation Name"] === "jobs" && n["Actual Loops"]! > 0)
            || (n["Index Name"] === "jobs_pkey" && n["Actual Loops"]! > 1))
          .map((n) => `${n["Node Type"]} ${n["Index Name"] ?? n["Relation Name"]}: ${n["Actual Rows"]} rows ×${n["Actual Loops"]}`);
      }
    }
    return seen;
  };
  const wrongScans = (seen: Record<string, string[]>) => Object.entries(seen).filter(([, wrong]) => wrong.length > 0);

  it("on a table never analyzed", async () => {
    const seen = await updateScans();
    expect(Object.keys(seen)).toHaveLength(6);
    expect(wrongScans(seen)).toEqual([]);
  });

  it("on the same table analyzed, which the planner then thinks small", async () => {
    await t.admin.query(`analyze "${t.schema}".jobs`);
    const seen = await updateScans();
    expect(Object.keys(seen)).toHaveLength(6);
    expect(wrongScans(seen)).toEqual([]);
  });
});

/**
 * A settle reaches its jobs by primary key, whatever the statistics say
 * (migration 0017, bench/levers.md lever 15). `jobs_lease_idx` keeps an entry
 * for every claim's row version until vacuum; a settle fenced on the status
 * let a planner that had seen few running jobs read that index whole (and the
 * heap behind it) for each batch: a settle of six jobs cost 3 ms behind
 * 8,000 settled ones. Here 3,000 jobs are claimed and settled with vacuum
 * off, the table is analyzed with none running, and a batch of ten start
 * marks and ten successes is settled.
 */
describe("a settle reads its jobs by primary key, once each, under statistics taken with none running", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await unvacuumedQueue(4_000);
    const settled = await claimJobs(t, { queue, runnerId: "r", limit: 3_000, maxLeaseMs: 60_000, fair: false });
    expect(await completeJobs(t, settled.map((j) => ({ id: j.id, leaseToken: j.leaseToken })))).toHaveProperty("size", 3_000);
    await t.admin.query(`analyze "${t.schema}".jobs`);
  }, 120_000);
  afterAll(() => t.drop());

  // Custom: planned for this batch, as a settle sent as text is. Generic: planned once for any batch, as a pool of
  // Leasehold's own replays its prepared settle once five plans agree (`hotQuery`), the arrays' lengths unknown.
  it.each(["custom", "generic"] as const)("for start marks and successes alike, in its %s plan: a few pages read, no scan of the lease index or the table", async (planned) => {
    const [a, b] = [await claimJobs(t, { queue, runnerId: "r", limit: 10, maxLeaseMs: 60_000, fair: false }), await claimJobs(t, { queue, runnerId: "r", limit: 10, maxLeaseMs: 60_000, fair: false })];
    const lease = (j: { id: string; leaseToken: string }) => ({ id: j.id, leaseToken: j.leaseToken });
    // The settle's statement, explained (and rolled back) before it runs for real.
    let plan: Node | undefined;
    const explaining: Queryable = {
      query: async (text: string, values?: unknown[]) => {
        if (plan === undefined && /^\s*with /.test(text)) {
          plan = await explainAnalyzed(t.admin, text, values!, planned, "rollback");
        }
        return t.db.query(text, values);
      },
    } as Queryable;
    const result = await settleJobs({ db: explaining, schema: t.schema }, { started: b.map(lease), succeeded: a.map(lease) });
    expect(result.succeeded.size).toBe(10);
    expect(result.started.size).toBe(10);
    const all = nodes(plan!);
    expect(all.filter((n) => n["Index Name"] === "jobs_lease_idx" || (n["Node Type"] === "Seq Scan" && n["Relation Name"] === "jobs"))).toEqual([]);
    // Nor is the batch's `unnest` read again for each job: those statistics call an unexpired lease one row,
    // and a plan that believed them joined each job to the whole batch (80 ms for 500 behind 100,000 later jobs).
    expect(all.filter((n) => n["Node Type"] === "Function Scan" && n["Actual Loops"]! > 1)).toEqual([]);
    // Twenty rows updated, each a probe and a new version: tens of pages, not the 3,000 dead entries' hundreds.
    expect(plan!["Shared Hit Blocks"]).toBeLessThan(200);
  });

  it("relies on a lease existing only while its job runs, which the table holds", async () => {
    const { rows: [done] } = await t.admin.query<{ id: string }>(`select id::text from "${t.schema}".jobs where status = 'succeeded' limit 1`);
    await expect(t.admin.query(`update "${t.schema}".jobs set lease_expires_at = now() + interval '1 hour' where id = $1::bigint`, [done!.id]))
      .rejects.toThrow(/jobs_lease_only_while_running/);
  });
});
