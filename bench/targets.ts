import type { BenchResults } from "./driver.ts";
import type { LibId } from "./lib.ts";

/** The targets, evaluated on one results object (medians of the same run). */

export interface TargetCheck {
  target: string;
  leasehold: string;
  peers: string;
  ratio: number | null;
  /** The same ratio in the worst run (runs pair by index: run i of every library is one round). */
  worst: number | null;
  /** What the ratio must satisfy, in words. */
  needs: string;
  /**
   * Whether the median ratio satisfies it, and the worst run its own bar
   * where the target sets one (the execute and scale-out leads: a lead must
   * hold in every round, not only in the middle one).
   */
  met: boolean | null;
}

/** Median of `metric` for `lib` in `phase`, or null. */
export function med(r: BenchResults, phase: string, lib: LibId, metric: string): number | null {
  return r.phases[phase]?.summary[lib]?.[metric]?.median ?? null;
}

export const ratio = (a: number | null, b: number | null) => (a == null || b == null || b === 0 ? null : Math.round((a / b) * 1000) / 1000);

/** `metric` of `lib` in `phase`, one value per run in run order (null for a failed run). */
export function perRun(r: BenchResults, phase: string, lib: LibId, metric: string): (number | null)[] {
  return r.phases[phase]?.per_run?.[lib]?.[metric] ?? [];
}

/** The least of several series, run by run (the fastest peer in each round). */
const leastPerRun = (...series: (number | null)[][]) =>
  Array.from({ length: Math.max(0, ...series.map((s) => s.length)) }, (_, i) => {
    const vs = series.map((s) => s[i]).filter((v): v is number => v != null);
    return vs.length ? Math.min(...vs) : null;
  });

/** The worst run's a ÷ b, pairing runs by index; `higher` when a larger ratio is better. */
export function worstRatio(a: (number | null)[], b: (number | null)[] | number, better: "higher" | "lower"): number | null {
  const xs = a.flatMap((v, i) => {
    const d = typeof b === "number" ? b : b[i];
    return v == null || d == null || d === 0 ? [] : [v / d];
  });
  if (xs.length === 0) return null;
  return Math.round((better === "higher" ? Math.min(...xs) : Math.max(...xs)) * 1000) / 1000;
}

const show = (v: number | null, unit: string) => (v == null ? "n/a" : `${v.toLocaleString("en-US")} ${unit}`);

export function evaluateTargets(r: BenchResults): TargetCheck[] {
  const out: TargetCheck[] = [];
  const add = (
    target: string, l: number | null, peers: string, x: number | null, worst: number | null, needs: string, ok: (x: number) => boolean, unit: string,
    worstOk?: (w: number) => boolean,
  ) => out.push({ target, leasehold: show(l, unit), peers, ratio: x, worst, needs, met: x == null ? null : ok(x) && (!worstOk || (worst != null && worstOk(worst))) });
  const runsOf = (phase: string, lib: LibId, metric: string) => perRun(r, phase, lib, metric);
  const both = (phase: string, metric: string, unit: string) =>
    `graphile-worker ${show(med(r, phase, "graphile", metric), unit)}, pg-boss ${show(med(r, phase, "pgboss", metric), unit)}`;

  for (const [phase, label] of [["batch-execute", ""], ["net-batch-execute", " (through the relay)"]] as const) {
    if (!r.phases[phase]) continue;
    const l = med(r, phase, "leasehold", "jobs_per_s");
    // graphile-worker's own figure says how fast the host was: the lead must hold whatever it is.
    add(`Execute ${r.meta.sizes.batch.toLocaleString("en-US")} ≥ 1.1× graphile-worker batched, no run below 1.0×${label}`, l, both(phase, "jobs_per_s", "jobs/s"),
      ratio(l, med(r, phase, "graphile", "jobs_per_s")), worstRatio(runsOf(phase, "leasehold", "jobs_per_s"), runsOf(phase, "graphile", "jobs_per_s"), "higher"),
      "Leasehold ÷ graphile-worker ≥ 1.1, worst run ≥ 1", (x) => x >= 1.1, "jobs/s", (w) => w >= 1);
    add(`Execute ${r.meta.sizes.batch.toLocaleString("en-US")} ≥ 3× pg-boss${label}`, l, both(phase, "jobs_per_s", "jobs/s"),
      ratio(l, med(r, phase, "pgboss", "jobs_per_s")), worstRatio(runsOf(phase, "leasehold", "jobs_per_s"), runsOf(phase, "pgboss", "jobs_per_s"), "higher"),
      "Leasehold ÷ pg-boss ≥ 3", (x) => x >= 3, "jobs/s");
  }
  if (r.phases["batch-execute"]) {
    const l = med(r, "batch-execute", "leasehold", "enqueue_batch_ms");
    const peers = [med(r, "batch-execute", "graphile", "enqueue_batch_ms"), med(r, "batch-execute", "pgboss", "enqueue_batch_ms")].filter((x): x is number => x != null);
    add(`Enqueue ${r.meta.sizes.batch.toLocaleString("en-US")} in one call ≤ 0.5× the fastest peer`, l, both("batch-execute", "enqueue_batch_ms", "ms"),
      ratio(l, peers.length ? Math.min(...peers) : null),
      worstRatio(runsOf("batch-execute", "leasehold", "enqueue_batch_ms"), leastPerRun(runsOf("batch-execute", "graphile", "enqueue_batch_ms"), runsOf("batch-execute", "pgboss", "enqueue_batch_ms")), "lower"),
      "Leasehold ÷ fastest peer ≤ 0.5", (x) => x <= 0.5, "ms");
    const rl = med(r, "batch-execute", "leasehold", "peak_rss_mib");
    add("Worker peak RSS ≤ graphile-worker's", rl, both("batch-execute", "peak_rss_mib", "MiB"),
      ratio(rl, med(r, "batch-execute", "graphile", "peak_rss_mib")), worstRatio(runsOf("batch-execute", "leasehold", "peak_rss_mib"), runsOf("batch-execute", "graphile", "peak_rss_mib"), "lower"),
      "Leasehold ÷ graphile-worker ≤ 1", (x) => x <= 1, "MiB");
  }
  if (r.phases["enqueue-one-by-one"]) {
    const l = med(r, "enqueue-one-by-one", "leasehold", "per_job_ms");
    const peers = [med(r, "enqueue-one-by-one", "graphile", "per_job_ms"), med(r, "enqueue-one-by-one", "pgboss", "per_job_ms")].filter((x): x is number => x != null);
    add(`Enqueue ${r.meta.sizes.seq.toLocaleString("en-US")} one at a time within 10% of the peers`, l, both("enqueue-one-by-one", "per_job_ms", "ms/job"),
      ratio(l, peers.length ? Math.min(...peers) : null),
      worstRatio(runsOf("enqueue-one-by-one", "leasehold", "per_job_ms"), leastPerRun(runsOf("enqueue-one-by-one", "graphile", "per_job_ms"), runsOf("enqueue-one-by-one", "pgboss", "per_job_ms")), "lower"),
      "Leasehold ÷ fastest peer ≤ 1.10", (x) => x <= 1.1, "ms/job");
  }
  if (r.phases.hop) {
    const l = med(r, "hop", "leasehold", "p50_ms");
    add("Hop p50 ≤ graphile-worker's", l, both("hop", "p50_ms", "ms"), ratio(l, med(r, "hop", "graphile", "p50_ms")),
      worstRatio(runsOf("hop", "leasehold", "p50_ms"), runsOf("hop", "graphile", "p50_ms"), "lower"), "Leasehold ÷ graphile-worker ≤ 1", (x) => x <= 1, "ms");
  }
  if (r.phases["scale-out"]) {
    const l = med(r, "scale-out", "leasehold", "jobs_per_s_p8");
    add("Scale-out: 8 processes of 10 slots ≥ 1.1× graphile-worker with 8", l, both("scale-out", "jobs_per_s_p8", "jobs/s"),
      ratio(l, med(r, "scale-out", "graphile", "jobs_per_s_p8")), worstRatio(runsOf("scale-out", "leasehold", "jobs_per_s_p8"), runsOf("scale-out", "graphile", "jobs_per_s_p8"), "higher"),
      "Leasehold ÷ graphile-worker ≥ 1.1", (x) => x >= 1.1, "jobs/s");
    add("Scale-out: Leasehold's 8 processes ≥ 0.8× its 1 process", l, `1 process: ${show(med(r, "scale-out", "leasehold", "jobs_per_s_p1"), "jobs/s")}`,
      ratio(l, med(r, "scale-out", "leasehold", "jobs_per_s_p1")), worstRatio(runsOf("scale-out", "leasehold", "jobs_per_s_p8"), runsOf("scale-out", "leasehold", "jobs_per_s_p1"), "higher"),
      "8 processes ÷ 1 ≥ 0.8", (x) => x >= 0.8, "jobs/s");
  }
  const big = r.phases["backlog-later-1m"] ? "backlog-later-1m" : null;
  if (big && r.phases["backlog-later-10k"]) {
    const l = med(r, big, "leasehold", "jobs_per_s");
    add("Backlog: execute with 1,000,000 queued ≥ 0.9× with 10,000", l,
      `with 10,000 queued: ${show(med(r, "backlog-later-10k", "leasehold", "jobs_per_s"), "jobs/s")}`,
      ratio(l, med(r, "backlog-later-10k", "leasehold", "jobs_per_s")), worstRatio(runsOf(big, "leasehold", "jobs_per_s"), runsOf("backlog-later-10k", "leasehold", "jobs_per_s"), "higher"),
      "1M ÷ 10k ≥ 0.9", (x) => x >= 0.9, "jobs/s");
  }
  for (const [phase, jobs] of [["fair-tenants", ""], ["fair-tenants-20ms", ", 20 ms jobs"], ["fair-tenants-200ms", ", 200 ms jobs"]] as const) {
    if (!r.phases[phase]) continue;
    const backlog = (r.phases[phase]!.runs.leasehold?.find((x) => "params" in x) as { params?: { bigJobs: number } } | undefined)?.params?.bigJobs;
    const fair = med(r, phase, "leasehold", "fair_small_p95_ms");
    add(`Fair claim${jobs}: five small tenants' wait p95 ≤ 1 s behind one tenant's ${backlog?.toLocaleString("en-US") ?? "backlog"}`, fair,
      `claim ignoring groups: ${show(med(r, phase, "leasehold", "unfair_small_p95_ms"), "ms")}`,
      fair == null ? null : Math.round(fair) / 1000, worstRatio(runsOf(phase, "leasehold", "fair_small_p95_ms"), 1_000, "lower"),
      "fair p95 ÷ 1,000 ms ≤ 1", (x) => x <= 1, "ms");
    add(`Fair claim${jobs}: throughput ≥ 0.9× the claim ignoring groups, same workload`, med(r, phase, "leasehold", "fair_jobs_per_s"),
      `claim ignoring groups: ${show(med(r, phase, "leasehold", "unfair_jobs_per_s"), "jobs/s")}`,
      med(r, phase, "leasehold", "throughput_ratio"), worstRatio(runsOf(phase, "leasehold", "throughput_ratio"), 1, "higher"),
      "fair ÷ ignoring groups ≥ 0.9", (x) => x >= 0.9, "jobs/s");
  }
  if (r.phases["ungrouped-claim"]) {
    add("Ungrouped jobs: execute with the fair claim within 5% of the plain claim", med(r, "ungrouped-claim", "leasehold", "fair_jobs_per_s"),
      `plain claim: ${show(med(r, "ungrouped-claim", "leasehold", "plain_jobs_per_s"), "jobs/s")}`,
      med(r, "ungrouped-claim", "leasehold", "ratio"), worstRatio(runsOf("ungrouped-claim", "leasehold", "ratio"), 1, "higher"),
      "fair ÷ plain ≥ 0.95", (x) => x >= 0.95, "jobs/s");
  }
  if (r.phases["edge-execute"]) {
    const l = med(r, "edge-execute", "leasehold", "edge_jobs_per_sec");
    const node = med(r, "edge-execute", "leasehold", "lambda_jobs_per_sec");
    add("Edge runner in workerd ≥ 0.9× the Lambda runner's loop, same relay", l, `Lambda runner loop: ${show(node, "jobs/s")}`,
      ratio(l, node), worstRatio(runsOf("edge-execute", "leasehold", "edge_jobs_per_sec"), runsOf("edge-execute", "leasehold", "lambda_jobs_per_sec"), "higher"),
      "edge ÷ Lambda loop ≥ 0.9", (x) => x >= 0.9, "jobs/s");
  }
  if (r.phases["batch-execute"]) {
    const l = med(r, "batch-execute", "leasehold", "startup_ms");
    add("Worker start-up to its first job ≤ graphile-worker's", l, both("batch-execute", "startup_ms", "ms"),
      ratio(l, med(r, "batch-execute", "graphile", "startup_ms")), worstRatio(runsOf("batch-execute", "leasehold", "startup_ms"), runsOf("batch-execute", "graphile", "startup_ms"), "lower"),
      "Leasehold ÷ graphile-worker ≤ 1", (x) => x <= 1, "ms");
  }
  if (r.phases["steps-chain"]) {
    add("Durable steps: a job of 10 steps costs no more than 10 chained jobs", med(r, "steps-chain", "leasehold", "steps_parts_per_s"),
      `chain: ${show(med(r, "steps-chain", "leasehold", "chain_parts_per_s"), "parts/s")}`,
      med(r, "steps-chain", "leasehold", "ratio"), worstRatio(runsOf("steps-chain", "leasehold", "ratio"), 1, "higher"),
      "steps ÷ chain ≥ 1", (x) => x >= 1, "parts/s");
  }
  return out;
}
