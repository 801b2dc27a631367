import type { BenchResults } from "./driver.ts";
import type { LibId } from "./lib.ts";

/** The targets, evaluated on one results object (medians of the same run). */

export interface TargetCheck {
  target: string;
  leasehold: string;
  peers: string;
  ratio: number | null;
  /** What the ratio must satisfy, in words. */
  needs: string;
  met: boolean | null;
}

/** Median of `metric` for `lib` in `phase`, or null. */
export function med(r: BenchResults, phase: string, lib: LibId, metric: string): number | null {
  return r.phases[phase]?.summary[lib]?.[metric]?.median ?? null;
}

export const ratio = (a: number | null, b: number | null) => (a == null || b == null || b === 0 ? null : Math.round((a / b) * 1000) / 1000);

const show = (v: number | null, unit: string) => (v == null ? "n/a" : `${v.toLocaleString("en-US")} ${unit}`);

export function evaluateTargets(r: BenchResults): TargetCheck[] {
  const out: TargetCheck[] = [];
  const add = (target: string, l: number | null, peers: string, x: number | null, needs: string, ok: (x: number) => boolean, unit: string) =>
    out.push({ target, leasehold: show(l, unit), peers, ratio: x, needs, met: x == null ? null : ok(x) });
  const both = (phase: string, metric: string, unit: string) =>
    `graphile-worker ${show(med(r, phase, "graphile", metric), unit)}, pg-boss ${show(med(r, phase, "pgboss", metric), unit)}`;

  for (const [phase, label] of [["batch-execute", ""], ["net-batch-execute", " (through the relay)"]] as const) {
    if (!r.phases[phase]) continue;
    const l = med(r, phase, "leasehold", "jobs_per_s");
    add(`Execute ${r.meta.sizes.batch.toLocaleString("en-US")} ≥ graphile-worker batched${label}`, l, both(phase, "jobs_per_s", "jobs/s"),
      ratio(l, med(r, phase, "graphile", "jobs_per_s")), "Leasehold ÷ graphile-worker ≥ 1", (x) => x >= 1, "jobs/s");
    add(`Execute ${r.meta.sizes.batch.toLocaleString("en-US")} ≥ 3× pg-boss${label}`, l, both(phase, "jobs_per_s", "jobs/s"),
      ratio(l, med(r, phase, "pgboss", "jobs_per_s")), "Leasehold ÷ pg-boss ≥ 3", (x) => x >= 3, "jobs/s");
  }
  if (r.phases["batch-execute"]) {
    const l = med(r, "batch-execute", "leasehold", "enqueue_batch_ms");
    const peers = [med(r, "batch-execute", "graphile", "enqueue_batch_ms"), med(r, "batch-execute", "pgboss", "enqueue_batch_ms")].filter((x): x is number => x != null);
    add(`Enqueue ${r.meta.sizes.batch.toLocaleString("en-US")} in one call ≤ 0.5× the fastest peer`, l, both("batch-execute", "enqueue_batch_ms", "ms"),
      ratio(l, peers.length ? Math.min(...peers) : null), "Leasehold ÷ fastest peer ≤ 0.5", (x) => x <= 0.5, "ms");
    const rl = med(r, "batch-execute", "leasehold", "peak_rss_mib");
    add("Worker peak RSS ≤ graphile-worker's", rl, both("batch-execute", "peak_rss_mib", "MiB"),
      ratio(rl, med(r, "batch-execute", "graphile", "peak_rss_mib")), "Leasehold ÷ graphile-worker ≤ 1", (x) => x <= 1, "MiB");
  }
  if (r.phases["enqueue-one-by-one"]) {
    const l = med(r, "enqueue-one-by-one", "leasehold", "per_job_ms");
    const peers = [med(r, "enqueue-one-by-one", "graphile", "per_job_ms"), med(r, "enqueue-one-by-one", "pgboss", "per_job_ms")].filter((x): x is number => x != null);
    add(`Enqueue ${r.meta.sizes.seq.toLocaleString("en-US")} one at a time within 10% of the peers`, l, both("enqueue-one-by-one", "per_job_ms", "ms/job"),
      ratio(l, peers.length ? Math.min(...peers) : null), "Leasehold ÷ fastest peer ≤ 1.10", (x) => x <= 1.1, "ms/job");
  }
  if (r.phases.hop) {
    const l = med(r, "hop", "leasehold", "p50_ms");
    add("Hop p50 ≤ graphile-worker's", l, both("hop", "p50_ms", "ms"), ratio(l, med(r, "hop", "graphile", "p50_ms")),
      "Leasehold ÷ graphile-worker ≤ 1", (x) => x <= 1, "ms");
  }
  if (r.phases["scale-out"]) {
    const l = med(r, "scale-out", "leasehold", "jobs_per_s_p8");
    add("Scale-out: 8 processes of 10 slots ≥ graphile-worker with 8", l, both("scale-out", "jobs_per_s_p8", "jobs/s"),
      ratio(l, med(r, "scale-out", "graphile", "jobs_per_s_p8")), "Leasehold ÷ graphile-worker ≥ 1", (x) => x >= 1, "jobs/s");
  }
  const big = r.phases["backlog-later-1m"] ? "backlog-later-1m" : null;
  if (big && r.phases["backlog-later-10k"]) {
    const l = med(r, big, "leasehold", "jobs_per_s");
    add("Backlog: execute with 1,000,000 queued within 20% of with 10,000", l,
      `with 10,000 queued: ${show(med(r, "backlog-later-10k", "leasehold", "jobs_per_s"), "jobs/s")}`,
      ratio(l, med(r, "backlog-later-10k", "leasehold", "jobs_per_s")), "1M ÷ 10k ≥ 0.8", (x) => x >= 0.8, "jobs/s");
  }
  for (const [phase, jobs] of [["fair-tenants", ""], ["fair-tenants-20ms", ", 20 ms jobs"], ["fair-tenants-200ms", ", 200 ms jobs"]] as const) {
    if (!r.phases[phase]) continue;
    const backlog = (r.phases[phase]!.runs.leasehold?.find((x) => "params" in x) as { params?: { bigJobs: number } } | undefined)?.params?.bigJobs;
    const fair = med(r, phase, "leasehold", "fair_small_p95_ms");
    add(`Fair claim${jobs}: five small tenants' wait p95 ≤ 1 s behind one tenant's ${backlog?.toLocaleString("en-US") ?? "backlog"}`, fair,
      `claim ignoring groups: ${show(med(r, phase, "leasehold", "unfair_small_p95_ms"), "ms")}`,
      fair == null ? null : Math.round(fair) / 1000, "fair p95 ÷ 1,000 ms ≤ 1", (x) => x <= 1, "ms");
    add(`Fair claim${jobs}: throughput ≥ 0.9× the claim ignoring groups, same workload`, med(r, phase, "leasehold", "fair_jobs_per_s"),
      `claim ignoring groups: ${show(med(r, phase, "leasehold", "unfair_jobs_per_s"), "jobs/s")}`,
      med(r, phase, "leasehold", "throughput_ratio"), "fair ÷ ignoring groups ≥ 0.9", (x) => x >= 0.9, "jobs/s");
  }
  if (r.phases["ungrouped-claim"]) {
    add("Ungrouped jobs: execute with the fair claim within 5% of the plain claim", med(r, "ungrouped-claim", "leasehold", "fair_jobs_per_s"),
      `plain claim: ${show(med(r, "ungrouped-claim", "leasehold", "plain_jobs_per_s"), "jobs/s")}`,
      med(r, "ungrouped-claim", "leasehold", "ratio"), "fair ÷ plain ≥ 0.95", (x) => x >= 0.95, "jobs/s");
  }
  if (r.phases["steps-chain"]) {
    add("Durable steps: a job of 10 steps costs no more than 10 chained jobs", med(r, "steps-chain", "leasehold", "steps_parts_per_s"),
      `chain: ${show(med(r, "steps-chain", "leasehold", "chain_parts_per_s"), "parts/s")}`,
      med(r, "steps-chain", "leasehold", "ratio"), "steps ÷ chain ≥ 1", (x) => x >= 1, "parts/s");
  }
  return out;
}
