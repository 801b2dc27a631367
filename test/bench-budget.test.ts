import { describe, expect, inject, it } from "vitest";
import { budgetMarkdown, budgetPhase } from "../bench/budget.ts";
import { runBench } from "../bench/driver.ts";

/**
 * The per-job budget phase, tiny: Leasehold alone, 200 jobs on the test
 * database. Checks that its counters are read at all and agree with each
 * other, never what they amount to.
 */
describe("per-job budget (smoke)", () => {
  it("counts Leasehold's work per job from the wire, the WAL, the server's statistics and the backends", async () => {
    const results = await runBench({
      adminDsn: inject("databaseUrl"),
      runs: 1,
      sizes: { batch: 200, seq: 1, hop: 1, slots: 20, scaleOut: 1 },
      libs: ["leasehold"],
      plan: [budgetPhase(["leasehold"])],
    });
    const phase = results.phases.budget!;
    const run = phase.runs.leasehold![0] as any;
    expect(run).not.toHaveProperty("error");
    expect(phase.checks_ok.leasehold).toBe(true);

    // Enqueue writes each job once, with its index entries, in WAL.
    const enqueue = run.per_job.enqueue;
    expect(enqueue.heap_inserted).toBeGreaterThanOrEqual(1);
    expect(enqueue.index_inserted).toBeGreaterThanOrEqual(1);
    expect(enqueue.wal_bytes).toBeGreaterThan(0);
    expect(enqueue.round_trips).toBeGreaterThan(0);

    // Executing writes one new version of the job and no attempt row (a success keeps its attempt in the
    // job row unless it carries a step log), costs CPU on both sides and some round trips.
    const execute = run.per_job.execute;
    expect(execute.heap_inserted).toBeLessThan(1);
    expect(execute.heap_updated).toBeGreaterThanOrEqual(1);
    expect(execute.wal_bytes).toBeGreaterThan(0);
    expect(execute.wal_commits).toBeGreaterThan(0);
    expect(execute.round_trips).toBeGreaterThan(0);
    expect(execute.transactions).toBeGreaterThan(0);
    expect(execute.worker_cpu_us).toBeGreaterThan(0);
    expect(execute.pg_cpu_us).toBeGreaterThan(0);

    // The WAL and pg_stat_user_tables tell the same story of the heap.
    const big = run.samples.big.execute.counts;
    expect(big.heap_inserted).toBe(big.stat_tup_ins);
    expect(big.heap_updated).toBe(big.stat_tup_upd);
    expect(big.heap_hot_updated).toBe(big.stat_tup_hot_upd);
    // The proxy sees every statement the worker sent through its query seam.
    expect(run.samples.big.execute.wire.statements).toBeGreaterThanOrEqual(run.samples.big.exec.extra.queries);
    expect(run.samples.big.execute.wire.backends_unread).toBe(0);

    expect(budgetMarkdown(phase)).toContain("| heap tuples inserted | 1 |");
  }, 120_000);
});
