import type { Context } from "aws-lambda";
import { afterEach, beforeEach, describe, expect, inject, it } from "vitest";
import type { Miniflare } from "miniflare";
import { createRunnerHandler } from "../functions/runner.ts";
import { enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { useWsRelay } from "../shared/db/drivers/neon.ts";
import { createTestDb, databaseUrl, type TestDb } from "./support/db.ts";
import { fireCron, startEdge, type OracleHit } from "./support/edge.ts";
import { edgeJobs } from "./fixtures/edge/jobs.ts";

/**
 * One database, two runtimes: the Lambda runner's handler (functions/runner.ts,
 * called in this process with a Lambda context, its Neon pool through the
 * local WebSocket relay) and edge runners in workerd drain the same queue at
 * once, both registered in the one fleet. The oracle records each handler's
 * start and end wherever it ran: every job runs exactly once.
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
    // The settings a deployed runner reads from its environment, as the local Lambda runtime sets them,
    // and the relay to the plain test Postgres, as the local functions' prelude applies it.
    Object.assign(process.env, { DATABASE_URL: databaseUrl(), LEASEHOLD_SCHEMA: db.schema });
    useWsRelay(inject("wsRelay"));
    const lambdaRunner = createRunnerHandler({
      registry, runner: "runner",
      config: { runners: { runner: { queues: ["default"], slots: 10, idleMs: 500, pollMs: 20, linger: "fixed" } } },
    });
    const deadline = Date.now() + 60_000;
    const context = { awsRequestId: "lambda-runner-1", getRemainingTimeInMillis: () => deadline - Date.now() } as Context;
    const [node] = await Promise.all([lambdaRunner({ invocationId: "lambda-runner-1" }, context), fireCron(mf)]);
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
