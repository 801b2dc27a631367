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
    const starts = oracle.filter((h) => h.event === "start");
    const ends = oracle.filter((h) => h.event === "end");
    expect(starts.map((h) => h.job).sort()).toEqual(ids);
    expect(ends.map((h) => h.job).sort()).toEqual(ids);
    // Both runtimes took part.
    const byRunner = (r: string) => starts.filter((h) => h.runner === r).length;
    expect(byRunner("node")).toBe(node.succeeded);
    expect(byRunner("node")).toBeGreaterThan(0);
    expect(byRunner("edge")).toBeGreaterThan(0);
    const { rows } = await db.admin.query<{ status: string; attempts: number; n: number }>(
      `select status::text, attempts, count(*)::int as n from "${db.schema}".jobs group by 1, 2`,
    );
    expect(rows).toEqual([{ status: "succeeded", attempts: 1, n: 400 }]);
  });
});
