import { describe, expect, it } from "vitest";
import { inject } from "vitest";
import { backlogPhase } from "../bench/backlog.ts";
import { runBench } from "../bench/driver.ts";
import { batchThenExecute, enqueueOneByOne, hopChain } from "../bench/phases.ts";
import { renderReport } from "../bench/report.ts";
import { scaleOutPhase } from "../bench/scale-out.ts";
import { shapePhase } from "../bench/shapes.ts";
import { shapesSection } from "../bench/report-shapes.ts";
import { edgeSection } from "../bench/report-edge.ts";
import { evaluateTargets, worstRatio } from "../bench/targets.ts";

/**
 * The benchmark harness, tiny: Leasehold's phases with a few hundred jobs on
 * the test database. Checks exactly-once and the shape of the results and
 * report, never timings.
 */
describe("bench harness (smoke)", () => {
  it("runs Leasehold's phases exactly once and returns results the report can render", async () => {
    const results = await runBench({
      adminDsn: inject("databaseUrl"),
      runs: 1,
      sizes: { batch: 200, seq: 20, hop: 10, slots: 20, scaleOut: 300 },
      libs: ["leasehold"],
      plan: [
        enqueueOneByOne("enqueue-one-by-one", false, ["leasehold"]),
        batchThenExecute("batch-execute", false, ["leasehold"]),
        hopChain("hop", false, ["leasehold"]),
        batchThenExecute("net-batch-execute", true, ["leasehold"]),
        backlogPhase("later", 1_000, "1k"),
        scaleOutPhase(["leasehold"], [1, 2]),
        shapePhase({ name: "shape-batch", label: "2 ms jobs, 2 processes", jobMs: 2, slots: 5, processes: 2, jobs: 100, arrival: { kind: "batch" } }, ["leasehold"]),
        shapePhase({ name: "shape-steady", label: "a steady stream", jobMs: 1, slots: 5, processes: 1, jobs: 30, arrival: { kind: "steady", perSecond: 200 } }, ["leasehold"]),
        shapePhase({ name: "shape-bursts", label: "bursts", jobMs: 1, slots: 5, processes: 1, jobs: 30, arrival: { kind: "bursts", burst: 10, everyMs: 50 } }, ["leasehold"]),
      ],
    });

    expect(Object.keys(results.phases)).toEqual(["enqueue-one-by-one", "batch-execute", "hop", "net-batch-execute", "backlog-later-1k", "scale-out", "shape-batch", "shape-steady", "shape-bursts"]);
    for (const [name, phase] of Object.entries(results.phases)) {
      expect(phase.runs.leasehold, name).toHaveLength(1);
      expect(phase.runs.leasehold![0], name).not.toHaveProperty("error");
    }

    const exec = results.phases["batch-execute"]!.runs.leasehold![0] as any;
    expect(exec.exec.ledger).toMatchObject({ handler_calls: 200, unique: 200, duplicates: 0, missing: 0, out_of_range: 0 });
    expect(exec.exec.db_after).toEqual({ succeeded: 200, not_succeeded: 0, attempts_not_1: 0, attempt_rows: 200 });
    expect(exec.exec.db_ok).toBe(true);
    const hop = results.phases.hop!.runs.leasehold![0] as any;
    expect(hop.hop).toMatchObject({ hops: 9, negative: 0, db_ok: true, ledger: { unique: 10, duplicates: 0, missing: 0 } });
    // A hop runs from the follow-up's enqueue commit to its start: never below zero.
    expect(hop.hop.min_ms).toBeGreaterThanOrEqual(0);
    const backlog = results.phases["backlog-later-1k"]!.runs.leasehold![0] as any;
    expect(backlog.claim_plan.index_scan).toBe(true);
    expect(backlog.exec.db_ok).toBe(true);
    const scale = results.phases["scale-out"]!.runs.leasehold![0] as any;
    for (const k of [1, 2]) {
      expect(scale.by_processes[k], `${k} processes`).toMatchObject({ processes: k, jobs: 300, handler_calls: 300, remaining_after: 0 });
      expect(scale.by_processes[k].children).toHaveLength(k);
      // Each job is claimed and completed in committed transactions of its own database.
      expect(scale.by_processes[k].commits_per_job).toBeGreaterThan(0);
      expect(scale.by_processes[k].activity.samples).toBeGreaterThan(0);
    }
    // Job shapes: every job ran once over the processes; an arriving shape reports each job's wait, from its own enqueue call.
    const batch = results.phases["shape-batch"]!.runs.leasehold![0] as any;
    expect(batch).toMatchObject({ handler_calls: 100, remaining_after: 0, distinct_started: null, wait_p50_ms: null });
    expect(batch.children).toHaveLength(2);
    expect(batch.commits_per_job).toBeGreaterThan(0);
    expect(batch.pg_cpu_ms).toBeGreaterThan(0);
    for (const name of ["shape-steady", "shape-bursts"]) {
      const arriving = results.phases[name]!.runs.leasehold![0] as any;
      expect(arriving, name).toMatchObject({ handler_calls: 30, distinct_started: 30, remaining_after: 0 });
      expect(arriving.wait_p50_ms, name).toBeGreaterThanOrEqual(0);
      expect(arriving.wait_p95_ms, name).toBeGreaterThanOrEqual(arriving.wait_p50_ms);
    }
    for (const phase of ["batch-execute", "hop", "net-batch-execute", "backlog-later-1k", "scale-out", "shape-batch", "shape-steady", "shape-bursts"]) {
      expect(results.phases[phase]!.checks_ok.leasehold, phase).toBe(true);
    }

    const summary = results.phases["batch-execute"]!.summary.leasehold!;
    for (const metric of ["enqueue_batch_ms", "exec_ms", "jobs_per_s", "peak_rss_mib"]) {
      expect(summary[metric], metric).toMatchObject({ median: expect.any(Number), min: expect.any(Number), max: expect.any(Number), n: 1 });
    }
    expect(results.phases["enqueue-one-by-one"]!.summary.leasehold!.per_job_ms!.n).toBe(1);
    // Per-run values are kept in run order, so a target's worst run can pair rounds.
    expect(results.phases["batch-execute"]!.per_run!.leasehold!.jobs_per_s).toEqual([summary.jobs_per_s!.median]);
    expect(results.meta).toMatchObject({
      runs: 1,
      node: process.version,
      machine: { cores: expect.any(Number), cpu_model: expect.any(String) },
      postgres: { version: expect.stringContaining("PostgreSQL") },
      libs: { leasehold: { name: "Leasehold" } },
      relay: { delay_ms_each_way: 2 },
    });

    // Peers absent: their targets cannot be judged, and say so rather than pass.
    // (Leasehold against itself is judged: the backlog, and 8 processes against 1.)
    expect(evaluateTargets(results).every((t) => t.met === null || t.target.startsWith("Backlog") || t.target.startsWith("Scale-out: Leasehold's"))).toBe(true);
    const report = renderReport(results, { resultsFile: "x.json", chartDir: ".", chartPrefix: "x" });
    expect(report.markdown).toContain("## Targets");
    expect(report.markdown).toContain("## Exactly once");
    expect(report.markdown).toContain("## Scale-out");
    expect(Object.keys(report.charts).length).toBeGreaterThan(0);
    for (const svg of Object.values(report.charts)) expect(svg.startsWith("<svg")).toBe(true);
  }, 90_000);
});

describe("a target's worst run", () => {
  it("pairs runs by round, not the best of one side against the worst of the other", () => {
    // Round 2 is the worst for "higher is better" (90 ÷ 100), though 90 is not Leasehold's least value.
    expect(worstRatio([120, 90, 80], [100, 100, 40], "higher")).toBe(0.9);
    expect(worstRatio([120, 90, 80], [100, 100, 40], "lower")).toBe(2);
    // A failed run (null) on either side drops that round; against a constant, each run is read alone.
    expect(worstRatio([null, 50, 70], [10, null, 35], "higher")).toBe(2);
    expect(worstRatio([400, 1_200, 900], 1_000, "lower")).toBe(1.2);
    expect(worstRatio([], 1, "higher")).toBeNull();
  });

  it("fails the execute lead when one round falls below 1.0x, though the median clears 1.1x", () => {
    const phase = (l: number[], g: number[]) => ({
      summary: { leasehold: { jobs_per_s: { median: median(l) } }, graphile: { jobs_per_s: { median: median(g) } } },
      per_run: { leasehold: { jobs_per_s: l }, graphile: { jobs_per_s: g } }, runs: {}, checks_ok: {},
    });
    const execute = (l: number[], g: number[]) =>
      evaluateTargets({ meta: { sizes: { batch: 10_000 } }, phases: { "batch-execute": phase(l, g) } } as never).find((t) => t.target.startsWith("Execute 10,000 ≥ 1.1×"))!;
    expect(execute([120, 118, 119], [100, 100, 100])).toMatchObject({ ratio: 1.19, worst: 1.18, met: true });
    expect(execute([120, 118, 95], [100, 100, 100])).toMatchObject({ ratio: 1.18, worst: 0.95, met: false });
    expect(execute([105, 106, 107], [100, 100, 100])).toMatchObject({ met: false });
  });

  it("shows each job shape with both libraries, the median's ratio and the worst round's, lower waits being better", () => {
    const series = (l: number[], g: number[], metric: string) => ({
      summary: { leasehold: { [metric]: { median: median(l) } }, graphile: { [metric]: { median: median(g) } } },
      per_run: { leasehold: { [metric]: l }, graphile: { [metric]: g } }, runs: {}, checks_ok: {},
    });
    const md = shapesSection({
      meta: { sizes: { batch: 10_000 } },
      phases: { "shape-5ms": series([3_000, 2_000, 3_300], [3_000, 3_000, 3_000], "jobs_per_s"), "shape-steady": series([10, 20, 12], [4, 4, 5], "wait_p50_ms") },
    } as never).join("\n");
    expect(md).toContain("## Job shapes");
    // Throughput: 3,000 ÷ 3,000 by median; the worst round is the second, 2,000 ÷ 3,000.
    expect(md).toMatch(/\| 5 ms jobs, 20 slots, 4,000 queued \| jobs\/s \(higher is better\) \| 3,000 \| 3,000 \| 1\.00× \| 0\.67× \|/);
    // Waits: 12 ÷ 4 by median; the worst round is the highest ratio, 20 ÷ 4.
    expect(md).toMatch(/\| wait p50, ms \(lower is better\) \| 12 \| 4 \| 3\.00× \| 5\.00× \|/);
    // A shape run for one library alone has no row.
    expect(shapesSection({ meta: {}, phases: { "shape-5ms": { summary: { leasehold: {} }, per_run: {}, runs: {}, checks_ok: {} } } } as never)).toEqual([]);
  });

  it("judges the edge runner by every run's own pair, and shows each run in the report", () => {
    const phase = (edge: number[], node: number[]) => ({
      summary: { leasehold: { edge_jobs_per_sec: { median: median(edge) }, lambda_jobs_per_sec: { median: median(node) } } },
      per_run: { leasehold: { edge_jobs_per_sec: edge, lambda_jobs_per_sec: node } },
      runs: { leasehold: edge.map((e, i) => ({ n: 10_000, slots: 20, edge_jobs_per_sec: e, lambda_jobs_per_sec: node[i], node_first: i % 2 === 0, edge_cpu_ms_per_job: 0.02, jobs_per_invocation: 1, usd_per_million_jobs: 0 })) },
      checks_ok: {},
    });
    const results = (edge: number[], node: number[]) => ({ meta: { sizes: { batch: 10_000 } }, phases: { "edge-execute": phase(edge, node) } }) as never;
    const target = (edge: number[], node: number[]) => evaluateTargets(results(edge, node)).find((t) => t.target.startsWith("Edge runner"))!;
    expect(target([95, 93, 99], [100, 100, 100])).toMatchObject({ ratio: 0.95, worst: 0.93, met: true });
    // The median edge figure against the median Lambda figure, the worst run paired by round.
    expect(target([95, 60, 99], [100, 100, 100])).toMatchObject({ ratio: 0.95, worst: 0.6, met: true });
    expect(target([85, 88, 99], [100, 100, 100])).toMatchObject({ ratio: 0.88, met: false });
    const section = edgeSection((phase([95, 60, 99], [100, 100, 100]).runs.leasehold) as never);
    expect(section.filter((l) => /^\| \d/.test(l))).toHaveLength(3);
    expect(section.find((l) => l.startsWith("| 2 (workerd first)"))).toContain("0.6×");
    expect(section.find((l) => l.startsWith("| median"))).toContain("| 95 jobs/s |");
  });
});

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
