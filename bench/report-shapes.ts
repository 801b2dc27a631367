import type { BenchResults } from "./driver.ts";
import { SHAPES } from "./shapes.ts";
import { med, perRun, ratio, worstRatio } from "./targets.ts";

/** The job-shapes section of BENCHMARKS.md: each shape's figures for Leasehold and graphile-worker, the median ratio and the worst run's. Pure. */

const num = (v: number | null, d = 0) => (v == null ? "n/a" : v.toLocaleString("en-US", { maximumFractionDigits: d }));
const times = (v: number | null) => (v == null ? "n/a" : `${v.toFixed(2)}×`);

export function shapesSection(r: BenchResults): string[] {
  const shapes = SHAPES.filter((s) => r.phases[s.name]?.summary.leasehold && r.phases[s.name]?.summary.graphile);
  if (shapes.length === 0) return [];
  const out: string[] = ["## Job shapes (Leasehold and graphile-worker)", ""];
  out.push(
    "The execute figures above are no-op jobs, 20 slots, all queued at once. Each shape here is another a user brings: handlers that await " +
      "5 or 20 ms (a call to another service), few slots and many, several processes, and jobs that arrive while the worker runs, one call " +
      "each or in bursts. Both libraries run as worker processes with the same pool (Leasehold with its bell on, as the Lambda runner runs). " +
      "Batch shapes are timed from the start signal until the database shows every job done; arriving shapes report the wait from the " +
      "enqueue call to the handler's start. CPU is the worker processes' and their Postgres backends', per 1,000 jobs; commits are the " +
      "workers' (pg_stat_database). Ratios are Leasehold ÷ graphile-worker, the median's and the worst run's (paired by round).",
    "",
  );
  out.push(
    "| shape | figure | Leasehold | graphile-worker | ratio | worst run | worker CPU ms / 1k | Postgres CPU ms / 1k | commits / job |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  );
  for (const s of shapes) {
    const figs: [string, string, "higher" | "lower", number][] =
      s.arrival.kind === "batch" ? [["jobs/s", "jobs_per_s", "higher", 0]] : [["wait p50, ms", "wait_p50_ms", "lower", 1], ["wait p95, ms", "wait_p95_ms", "lower", 1]];
    for (const [label, metric, better, d] of figs) {
      const l = med(r, s.name, "leasehold", metric);
      const g = med(r, s.name, "graphile", metric);
      const worst = worstRatio(perRun(r, s.name, "leasehold", metric), perRun(r, s.name, "graphile", metric), better);
      const pair = (metric: string, d: number) => `${num(med(r, s.name, "leasehold", metric), d)} / ${num(med(r, s.name, "graphile", metric), d)}`;
      out.push(`| ${s.label} | ${label} (${better} is better) | ${num(l, d)} | ${num(g, d)} | ${times(ratio(l, g))} | ${times(worst)} | ` +
        `${pair("cpu_ms_per_1k", 0)} | ${pair("pg_cpu_ms_per_1k", 0)} | ${pair("commits_per_job", 3)} |`);
    }
  }
  out.push("");
  return out;
}
