import { WORKERS_PRICES } from "./edge.ts";
import { percentile } from "./stats.ts";

/** The edge phase's section of the report: throughput beside the Lambda runner's, run by run, and cost at Workers prices. */
export function edgeSection(runs: Record<string, any>[]): string[] {
  const e = runs[0]!;
  const ratioOf = (x: Record<string, any>) => Math.round((x.edge_jobs_per_sec / x.lambda_jobs_per_sec) * 100) / 100;
  const row = (label: string, x: Record<string, any>) =>
    `| ${label} | ${x.lambda_jobs_per_sec} jobs/s | ${x.edge_jobs_per_sec} jobs/s | ${ratioOf(x)}× | ${x.edge_cpu_ms_per_job} ms | ${x.jobs_per_invocation.toLocaleString("en-US")} | $${x.usd_per_million_jobs} |`;
  const order = (x: Record<string, any>) => (x.node_first === undefined ? "" : x.node_first ? " (Node first)" : " (workerd first)");
  const mid = Object.fromEntries(["lambda_jobs_per_sec", "edge_jobs_per_sec", "edge_cpu_ms_per_job", "jobs_per_invocation", "usd_per_million_jobs"]
    .map((k) => [k, Math.round(percentile(runs.map((x) => x[k] as number), 50)! * 1e6) / 1e6]));
  return [
    "## Edge runner (Leasehold on Cloudflare Workers, in workerd)", "",
    `${e.n.toLocaleString("en-US")} no-op jobs, ${e.slots} slots, drained by one runner invocation in each runtime, one after the other on one database (odd runs Node first, even runs workerd first), each warmed first by an untimed drain of a fifth as many (a reused Lambda container, a reused Worker isolate), both through the Neon driver over the same local WebSocket relay. ` +
      "Lambda = the Lambda runner's loop (`runWorker`) in Node; edge = `functions/edge/worker.ts` in workerd (miniflare), started by its runner route.", "",
    "| run | Lambda runner loop (Node) | edge runner (workerd) | edge ÷ Lambda | edge CPU per job | jobs per edge invocation | edge $ per million jobs |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...runs.map((x, i) => row(`${i + 1}${order(x)}`, x)),
    ...(runs.length > 1 ? [row("median", mid)] : []),
    "",
    `Prices: Workers Paid beyond the included allowance, $${WORKERS_PRICES.perMillionRequests.toFixed(2)} per million requests and $${WORKERS_PRICES.perMillionCpuMs.toFixed(2)} per million CPU-ms; the $5 monthly minimum and its included 10M requests and 30M CPU-ms are left out. ` +
      "CPU per job is the workerd process's user + system time over the drain (from /proc), so it also counts the runtime's own work and is an upper bound on billed CPU. " +
      "Requests: one runner invocation per the jobs a 60 s wall-time budget (less the 5 s margin) drains at the measured rate; the scheduler's cron invocations (one a minute) are not counted per job. " +
      "Handlers here do nothing: a real handler's CPU time adds to the CPU figure.",
    "",
  ];
}
