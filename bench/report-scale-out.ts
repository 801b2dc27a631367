import type { BenchResults } from "./driver.ts";
import type { LibId } from "./lib.ts";
import { SCALE_OUT_SLOTS } from "./scale-out.ts";
import { barChart } from "./svg.ts";
import { med, ratio } from "./targets.ts";

/** The scale-out section of BENCHMARKS.md: throughput per process count, commits per job, WAL waits. Pure. */

const ORDER: LibId[] = ["leasehold", "graphile", "pgboss"];
const num = (v: number | null, d = 0) => (v == null ? "n/a" : v.toLocaleString("en-US", { maximumFractionDigits: d }));
const times = (v: number | null) => (v == null ? "n/a" : `${v.toFixed(2)}×`);
const pct = (v: number | null) => (v == null ? "n/a" : `${Math.round(v * 100)}%`);

/** Process counts the phase ran, from its first successful record. */
function processCounts(r: BenchResults): number[] {
  for (const runs of Object.values(r.phases["scale-out"]?.runs ?? {})) {
    const ok = (runs ?? []).find((x) => !("error" in x)) as { processes?: number[] } | undefined;
    if (ok?.processes) return ok.processes;
  }
  return [];
}

export function scaleOutSection(
  r: BenchResults,
  colors: Record<string, string>,
  chartRef: (file: string, svg: string, alt: string) => string,
  chartPrefix: string,
): string[] {
  const phase = r.phases["scale-out"];
  if (!phase) return [];
  const libs = ORDER.filter((l) => phase.libs.includes(l) && r.meta.libs[l]);
  const name = (l: LibId) => r.meta.libs[l]!.name;
  const counts = processCounts(r);
  const m = (l: LibId, metric: string, k: number) => med(r, "scale-out", l, `${metric}_p${k}`);
  const jobs = r.meta.sizes.scaleOut ?? 0;
  const out: string[] = ["## Scale-out (many runners at once)", ""];
  out.push(
    `${jobs.toLocaleString("en-US")} empty jobs queued, then drained by 1 to ${Math.max(...counts, 0)} worker processes of ${SCALE_OUT_SLOTS} slots each, ` +
      "all loaded first and started together; timed until the database shows every job done. " +
      "Commits per job: `xact_commit` of the library's own database (pg_stat_database) over the drain, from worker start to worker exit, ÷ jobs. " +
      "WAL/IO wait: of the library's busy backends (`state = 'active'`) sampled in pg_stat_activity every ~10 ms, the share waiting on `WALWrite` or `WALSync` (LWLock or IO) or any other IO.",
    "",
  );
  const head = [
    "processes",
    ...libs.map((l) => `${name(l)} jobs/s`),
    ...libs.filter((l) => l !== "graphile" && libs.includes("graphile")).map((l) => `${name(l)} ÷ graphile-worker`),
    ...libs.map((l) => `${name(l)} ÷ its 1 process`),
  ];
  out.push(`| ${head.join(" | ")} |`, `|${" --- |".repeat(head.length)}`);
  for (const k of counts) {
    const cells = [
      String(k),
      ...libs.map((l) => num(m(l, "jobs_per_s", k))),
      ...libs.filter((l) => l !== "graphile" && libs.includes("graphile")).map((l) => times(ratio(m(l, "jobs_per_s", k), m("graphile", "jobs_per_s", k)))),
      ...libs.map((l) => times(ratio(m(l, "jobs_per_s", k), m(l, "jobs_per_s", counts[0]!)))),
    ];
    out.push(`| ${cells.join(" | ")} |`);
  }
  out.push("");
  const head2 = ["processes", ...libs.map((l) => `${name(l)} commits/job`), ...libs.map((l) => `${name(l)} WAL/IO wait`)];
  out.push(`| ${head2.join(" | ")} |`, `|${" --- |".repeat(head2.length)}`);
  for (const k of counts) {
    out.push(`| ${[String(k), ...libs.map((l) => num(m(l, "commits_per_job", k), 2)), ...libs.map((l) => pct(m(l, "wal_wait_share", k)))].join(" | ")} |`);
  }
  out.push("");
  out.push(chartRef(`${chartPrefix}-scale-out.svg`, barChart({
    title: `Drain ${jobs.toLocaleString("en-US")} jobs with N processes of ${SCALE_OUT_SLOTS} slots`,
    unit: "jobs/s",
    note: "higher is better",
    colors,
    groups: counts.map((k) => ({
      label: `${k} process${k > 1 ? "es" : ""}`,
      bars: libs.map((l) => ({ series: name(l), value: m(l, "jobs_per_s", k) })),
    })),
  }), "scale-out throughput"), "");
  return out;
}
