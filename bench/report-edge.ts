import { WORKERS_PRICES } from "./edge.ts";

/** The edge phase's section of the report: throughput beside the Lambda runner's, and cost at Workers prices. */
export function edgeSection(e: Record<string, any>): string[] {
  return [
    "## Edge runner (Leasehold on Cloudflare Workers, in workerd)", "",
    `${e.n.toLocaleString("en-US")} no-op jobs, ${e.slots} slots, drained by one runner invocation in each runtime, one after the other on one database, both through the Neon driver over the same local WebSocket relay. ` +
      "Lambda = the Lambda runner's loop (`runWorker`) in Node; edge = `functions/edge/worker.ts` in workerd (miniflare), started by its runner route.", "",
    "| Lambda runner loop (Node) | edge runner (workerd) | edge CPU per job | jobs per edge invocation | edge $ per million jobs |",
    "| --- | --- | --- | --- | --- |",
    `| ${e.lambda_jobs_per_sec} jobs/s | ${e.edge_jobs_per_sec} jobs/s | ${e.edge_cpu_ms_per_job} ms | ${e.jobs_per_invocation.toLocaleString("en-US")} | $${e.usd_per_million_jobs} (requests $${e.usd_requests} + CPU $${e.usd_cpu}) |`,
    "",
    `Prices: Workers Paid beyond the included allowance, $${WORKERS_PRICES.perMillionRequests.toFixed(2)} per million requests and $${WORKERS_PRICES.perMillionCpuMs.toFixed(2)} per million CPU-ms; the $5 monthly minimum and its included 10M requests and 30M CPU-ms are left out. ` +
      "CPU per job is the workerd process's user + system time over the drain (from /proc), so it also counts the runtime's own work and is an upper bound on billed CPU. " +
      "Requests: one runner invocation per the jobs a 60 s wall-time budget (less the 5 s margin) drains at the measured rate; the scheduler's cron invocations (one a minute) are not counted per job. " +
      "Handlers here do nothing: a real handler's CPU time adds to the CPU figure.",
    "",
  ];
}
