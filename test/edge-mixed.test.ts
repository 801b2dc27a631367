import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Miniflare } from "miniflare";
import { enqueueJobs, job } from "../shared/enqueue.ts";
import { runWorker } from "../shared/worker.ts";
import { createTestDb, type TestDb } from "./support/db.ts";
import { fireCron, startEdge, type OracleHit } from "./support/edge.ts";
import { edgeJobs } from "./fixtures/edge/jobs.ts";

/**
 * One database, two runtimes: a Node runner (the Lambda runner's loop) and
 * edge runners in workerd drain the same queue at once. The oracle records
 * each handler's start and end wherever it ran: every job runs exactly once.
 */
describe("a Lambda runner and edge runners on one database", () => {
  let db: TestDb;
  let mf: Miniflare | undefined;
  beforeEach(async () => {
    db = await createTestDb("neon", 3);
  });
  afterEach(async () => {
    await mf?.dispose();
    mf = undefined;
    await db.drop();
  });

  it("runs no job twice and loses none", async () => {
    const oracle: OracleHit[] = [];
    const registry = edgeJobs(async (event, jobId, attempt, runner) => {
      oracle.push({ event, job: jobId, attempt, runner, at: Date.now() });
    }, "node");
    const jobs = await enqueueJobs(db, Array.from({ length: 400 }, (_, n) => job(registry.get("edge.record")!, { n, sleepMs: 5 + (n % 4) * 5 })));
    mf = await startEdge({ schema: db.schema, oracle });
    const [node] = await Promise.all([
      runWorker({ store: db, registry, queues: ["default"], runnerId: "node", slots: 10, idleMs: 500, pollMs: 20 }),
      fireCron(mf),
    ]);
    const ids = jobs.map((j) => j.id).sort();
    const runs = new Map<string, OracleHit[]>();
    for (const h of oracle) runs.set(h.job, [...(runs.get(h.job) ?? []), h]);
    // None lost: every job was started and ended, and ended succeeded.
    expect([...runs.keys()].sort()).toEqual(ids);
    const { rows } = await db.admin.query<{ id: string; status: string; attempts: number }>(
      `select id::text, status::text, attempts from "${db.schema}".jobs order by id`,
    );
    expect(rows.filter((r) => r.status !== "succeeded")).toEqual([]);
    for (const r of rows) {
      const hits = runs.get(r.id)!;
      const starts = hits.filter((h) => h.event === "start");
      // None run twice: each run is an attempt the database charged (a run
      // past its lease, on a loaded host, is retried as a new attempt, never
      // beside the first), and only the last attempt's end is a success.
      expect(starts.map((h) => h.attempt), r.id).toEqual(Array.from({ length: r.attempts }, (_, i) => i + 1));
      expect(hits.filter((h) => h.event === "end").at(-1)?.attempt, r.id).toBe(r.attempts);
    }
    // Nearly every job ran once, and both runtimes took part.
    expect(rows.filter((r) => r.attempts === 1).length).toBeGreaterThan(390);
    const byRunner = (runner: string) => oracle.filter((h) => h.event === "start" && h.runner === runner).length;
    expect(byRunner("node")).toBeGreaterThan(0);
    expect(byRunner("edge")).toBeGreaterThan(0);
    expect(node.stale).toBe(0);
  });
});
