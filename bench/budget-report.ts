import type { PhaseResult } from "./driver.ts";
import type { LibId } from "./lib.ts";
import type { Phase } from "./phases.ts";
import { round } from "./stats.ts";
import { worstRatio } from "./targets.ts";

/**
 * The per-job budget's figures and table (bench/budget.ts measures them):
 * each section's counters, per job and at the margin, the metrics the phase
 * reports, and the markdown that sets the libraries side by side.
 */

/** One section's totals (a sample at one n). */
export interface SectionCounts {
  worker_cpu_us: number;
  pg_cpu_us: number;
  round_trips: number;
  statements: number;
  parses: number;
  transactions: number;
  wire_bytes: number;
  connections: number;
  heap_inserted: number;
  heap_updated: number;
  heap_hot_updated: number;
  heap_deleted: number;
  heap_locked: number;
  index_inserted: number;
  index_splits: number;
  wal_records: number;
  wal_bytes: number;
  wal_fpi_bytes: number;
  wal_commits: number;
  stat_tup_ins: number;
  stat_tup_upd: number;
  stat_tup_hot_upd: number;
  stat_tup_del: number;
}

/** A section's figures per job: every counter at n ÷ n, and the CPU also at the margin, (at n − at n0) ÷ (n − n0). */
export type PerJob = SectionCounts & { worker_cpu_marginal_us: number; pg_cpu_marginal_us: number };

export function perJob(big: SectionCounts, small: SectionCounts, n: number, n0: number): PerJob {
  const each = Object.fromEntries(Object.entries(big).map(([k, v]) => [k, round(v / n, 5)])) as unknown as SectionCounts;
  return {
    ...each,
    worker_cpu_marginal_us: round((big.worker_cpu_us - small.worker_cpu_us) / (n - n0), 2),
    pg_cpu_marginal_us: round((big.pg_cpu_us - small.pg_cpu_us) / (n - n0), 2),
  };
}

/** The rows of the budget table: counter, label, and how the ratio reads. */
export const BUDGET_ROWS: [keyof PerJob, string][] = [
  ["worker_cpu_us", "worker CPU (µs)"],
  ["pg_cpu_us", "Postgres backend CPU (µs)"],
  ["worker_cpu_marginal_us", "worker CPU, marginal (µs)"],
  ["pg_cpu_marginal_us", "Postgres CPU, marginal (µs)"],
  ["round_trips", "round trips per 1,000 jobs"],
  ["statements", "statements per 1,000 jobs"],
  ["parses", "Parse messages per 1,000 jobs"],
  ["transactions", "transactions per 1,000 jobs"],
  ["heap_inserted", "heap tuples inserted"],
  ["heap_updated", "heap tuples updated"],
  ["heap_hot_updated", "… of which HOT"],
  ["heap_deleted", "heap tuples deleted"],
  ["heap_locked", "heap LOCK records"],
  ["index_inserted", "B-tree entries inserted"],
  ["wal_records", "WAL records"],
  ["wal_bytes", "WAL bytes (no page images)"],
  ["wal_fpi_bytes", "WAL full-page-image bytes"],
  ["wire_bytes", "bytes on the wire"],
];

const SECTIONS = ["execute", "enqueue"] as const;

/** Counters too small per job to read: the table and the metrics give them per 1,000 jobs. */
const PER_1000 = new Set<string>(["round_trips", "statements", "parses", "transactions", "wal_commits", "index_splits"]);

/** The phase's metrics: each counter per section, per job (or per 1,000 jobs), and the HOT share. */
export const budgetMetrics = () => {
  const m: Phase["metrics"] = {};
  for (const s of SECTIONS) for (const k of [...BUDGET_ROWS.map(([k]) => k), "stat_tup_ins", "stat_tup_upd", "stat_tup_hot_upd", "stat_tup_del", "wal_commits", "index_splits"]) {
    m[`${s}_${k}`] = (r) => (r.per_job?.[s]?.[k] == null ? null : round(r.per_job[s][k] * (PER_1000.has(k) ? 1000 : 1), 3));
  }
  for (const s of SECTIONS) {
    m[`${s}_hot_ratio`] = (r) => {
      const c = r.per_job?.[s];
      return c && c.heap_updated > 0 ? round(c.heap_hot_updated / c.heap_updated, 3) : null;
    };
  }
  return m;
};

const fmt = (v: number | null | undefined) =>
  v == null ? "–" : v === 0 ? "0" : Math.abs(v) >= 100 ? String(Math.round(v)) : Number(v.toPrecision(3)).toString();

/**
 * The budget side by side: median per job of each library (the highest run
 * in brackets when there are several), and Leasehold ÷ the first peer by
 * median (the worst round in brackets: runs pair by index).
 */
export function budgetMarkdown(pr: PhaseResult): string {
  const libs = pr.libs.filter((l) => pr.summary[l]);
  const peer = libs.find((l) => l !== "leasehold");
  const out: string[] = [];
  for (const s of SECTIONS) {
    out.push(`**${s === "execute" ? "Execute" : "Enqueue (one call)"}, per job**`, "");
    out.push(`| | ${libs.join(" | ")}${peer && libs.includes("leasehold") ? ` | leasehold ÷ ${peer} |` : " |"}`);
    out.push(`|---|${libs.map(() => "---:").join("|")}|${peer && libs.includes("leasehold") ? "---:|" : ""}`);
    const rows: [string, string][] = [...BUDGET_ROWS.map(([k, label]) => [k, label] as [string, string]), ["hot_ratio", "HOT share of updates"]];
    for (const [k, label] of rows) {
      const cell = (l: LibId) => {
        const st = pr.summary[l]?.[`${s}_${k}`];
        if (!st) return "–";
        return st.n > 1 && st.max !== st.median ? `${fmt(st.median)} (${fmt(st.max)})` : fmt(st.median);
      };
      const a = pr.summary.leasehold?.[`${s}_${k}`]?.median;
      const b = peer ? pr.summary[peer]?.[`${s}_${k}`]?.median : undefined;
      const worst = peer ? worstRatio(pr.per_run?.leasehold?.[`${s}_${k}`] ?? [], pr.per_run?.[peer]?.[`${s}_${k}`] ?? [], k === "hot_ratio" ? "higher" : "lower") : null;
      const ratio = a != null && b != null && b !== 0 ? `${(a / b).toFixed(2)}×${worst != null && (pr.per_run?.leasehold?.[`${s}_${k}`]?.length ?? 0) > 1 ? ` (${worst.toFixed(2)}×)` : ""}` : "–";
      out.push(`| ${label} | ${libs.map(cell).join(" | ")}${peer && libs.includes("leasehold") ? ` | ${ratio} |` : " |"}`);
    }
    out.push("");
  }
  out.push("**Postgres CPU per job by statement (execute, first run)**", "", "| library | statement (start of its text) | statements | µs per job |", "|---|---|---:|---:|");
  for (const l of libs) {
    const run = pr.runs[l]?.find((r) => !("error" in r)) as { pg_by_statement?: { execute: { statement: string; count: number; cpu_us_per_job: number }[] } } | undefined;
    for (const st of run?.pg_by_statement?.execute.slice(0, 5) ?? []) out.push(`| ${l} | \`${st.statement.replace(/\|/g, "\\|")}\` | ${st.count} | ${fmt(st.cpu_us_per_job)} |`);
  }
  out.push("");
  return out.join("\n");
}
