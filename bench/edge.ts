import { readdirSync, readFileSync } from "node:fs";
import { Miniflare } from "miniflare";
import WebSocket from "ws";
import { bundleEdgeWorker } from "../dev/edge-bundle.ts";
import { startWsRelay } from "../dev/ws-relay.ts";
import { RUNNER_MARGIN_MS } from "../shared/settings/config.ts";
import { createNeonPool } from "../shared/db/drivers/neon.ts";
import { EDGE_COMPATIBILITY, EDGE_ENV } from "../shared/settings/environment.ts";
import { createPgPool } from "../shared/db/drivers/pg.ts";
import { enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { migrate } from "../shared/db/migrate.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { dropDb, dsnFor, freshDb } from "./db.ts";
import { edgeBenchRegistry, edgeBenchType } from "./edge-worker.ts";
import type { BenchContext, Phase } from "./phases.ts";
import { round } from "./stats.ts";

/**
 * Execute throughput of the edge runner in workerd beside the Lambda
 * runner's loop in Node, on one database, both through the Neon driver over
 * the same local WebSocket relay; and the edge runner's CPU time (the workerd
 * process's, read from /proc) priced at Workers Paid rates. Every run, with
 * the two drains in turn first (odd runs Node first, even runs workerd), so
 * neither always meets the warmer database, and both warmed up first.
 */
const SCHEMA = "leasehold";
const SECRET = "bench-runner-secret-0123456789abcdef";

/** Workers Paid, beyond the included allowance: $0.30 per million requests, $0.02 per million CPU-ms. */
export const WORKERS_PRICES = { perMillionRequests: 0.3, perMillionCpuMs: 0.02 };
/** The default edge runner's wall-time budget, for jobs per invocation. */
const WALL_MS = 60_000;

/** CPU time (user + system, ms) of the workerd processes this process started. */
function workerdCpuMs(): number {
  const tick = 10; // USER_HZ 100
  let ms = 0;
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (comm.startsWith("workerd") && Number(fields[1]) === process.pid) ms += (Number(fields[11]) + Number(fields[12])) * tick;
    } catch {
      // the process ended meanwhile
    }
  }
  return ms;
}

export async function runEdgeBench(ctx: BenchContext, n: number) {
  const name = `bench_edge_r${ctx.run}`;
  const dsn = dsnFor(ctx.adminDsn, name);
  await freshDb(ctx.adminDsn, name);
  const relay = await startWsRelay();
  const admin = createPgPool(dsn, 2);
  let mf: Miniflare | undefined;
  try {
    await migrate(admin, SCHEMA);
    const store = { db: admin, schema: SCHEMA };
    const specs = Array.from({ length: n }, (_, i) => job(edgeBenchType, { i }));
    /** Jobs per second from the start to the last job's commit, on the database's clock. */
    const drained = async (startedAt: Date) => {
      const { rows } = await admin.query<{ ok: number; secs: number }>(
        `select count(*) filter (where status = 'succeeded' and attempts = 1)::int as ok,
                extract(epoch from max(finished_at) - $1::timestamptz)::float8 as secs
         from leasehold.jobs where finished_at >= $1::timestamptz or status <> 'succeeded'`, [startedAt]);
      return { ok: rows[0]!.ok, jobsPerSec: round(rows[0]!.ok / rows[0]!.secs, 0) };
    };
    const dbNow = async () => (await admin.query<{ t: Date }>("select clock_timestamp() as t")).rows[0]!.t;

    // The Lambda runner's loop, in Node, through the Neon driver.
    const inNode = async (batch = specs) => {
      await enqueueJobs(store, batch);
      const pool = createNeonPool(dsn, { max: 3, wsProxy: relay.address, webSocketConstructor: WebSocket });
      const startedAt = await dbNow();
      const node = await runWorker({ linger: "fixed", store: { db: pool, schema: SCHEMA }, registry: edgeBenchRegistry, queues: ["default"], runnerId: `node-${ctx.run}-${batch.length}`, slots: ctx.sizes.slots, idleMs: 300, pollMs: 20 });
      await pool.end();
      return { ...(await drained(startedAt)), claimed: node.claimed };
    };

    // The edge runner, in workerd, one invocation.
    mf = new Miniflare({
      modules: true, script: await bundleEdgeWorker("bench/edge-worker.ts", { wsProxy: relay.address }), compatibilityDate: EDGE_COMPATIBILITY.date, compatibilityFlags: [...EDGE_COMPATIBILITY.flags],
      bindings: {
        [EDGE_ENV.databaseUrl]: dsn, [EDGE_ENV.runnerSecret]: SECRET,
        [EDGE_ENV.config]: JSON.stringify({
          runners: {},
          edge: { runners: { "edge-runner": { queues: ["default"], slots: ctx.sizes.slots, wallMs: 300_000, idleMs: 300, pollMs: 20 } } },
        }),
      },
      handleStructuredLogs: () => {},
      structuredWorkerdLogs: true,
    });
    await mf.ready;
    const inWorkerd = async (batch = specs) => {
      await enqueueJobs(store, batch);
      const cpuBefore = workerdCpuMs();
      const startedAt = await dbNow();
      const res = await mf!.dispatchFetch("https://edge/leasehold/run", {
        method: "POST", headers: { "x-leasehold-runner-secret": SECRET }, body: JSON.stringify({ runner: "edge-runner", invocationId: `bench-${ctx.run}-${batch.length}` }),
      });
      const summary = JSON.parse(await res.text()) as { claimed: number };
      const cpuMs = workerdCpuMs() - cpuBefore;
      return { ...(await drained(startedAt)), claimed: summary.claimed, cpuMs };
    };
    // Both warm, as a reused Lambda container and a reused Worker isolate
    // are: each first drains a warm-up batch, untimed. Without it the Node
    // loop ran warm from the second run on (this process had run it) and
    // the new Miniflare's isolate ran cold every time.
    const warmUp = specs.slice(0, Math.ceil(n / 5));
    await inNode(warmUp);
    await inWorkerd(warmUp);
    const nodeFirst = ctx.run % 2 === 1;
    const lambdaBefore = nodeFirst ? await inNode() : undefined;
    const edge = await inWorkerd();
    const lambda = lambdaBefore ?? (await inNode());
    const { cpuMs } = edge;

    const cpuMsPerJob = round(cpuMs / n, 3);
    const jobsPerInvocation = Math.max(1, Math.round((edge.jobsPerSec * (WALL_MS - RUNNER_MARGIN_MS)) / 1000));
    const requestsUsd = (1e6 / jobsPerInvocation) * (WORKERS_PRICES.perMillionRequests / 1e6);
    const cpuUsd = cpuMsPerJob * 1e6 * (WORKERS_PRICES.perMillionCpuMs / 1e6);
    return {
      n,
      slots: ctx.sizes.slots,
      lambda_jobs_per_sec: lambda.jobsPerSec,
      edge_jobs_per_sec: edge.jobsPerSec,
      node_first: nodeFirst,
      lambda_ok: lambda.ok === n,
      edge_ok: edge.ok === n,
      edge_cpu_ms_per_job: cpuMsPerJob,
      jobs_per_invocation: jobsPerInvocation,
      usd_per_million_jobs: round(requestsUsd + cpuUsd, 6),
      usd_requests: round(requestsUsd, 6),
      usd_cpu: round(cpuUsd, 6),
    };
  } finally {
    await mf?.dispose();
    await admin.end();
    await relay.close();
    await dropDb(ctx.adminDsn, name);
  }
}

export const edgePhase: Phase = {
  name: "edge-execute",
  title: "Execute on the edge runner (workerd) beside the Lambda runner's loop (Node)",
  libs: ["leasehold"],
  run: (_lib, ctx) => runEdgeBench(ctx, ctx.sizes.batch),
  metrics: {
    lambda_jobs_per_sec: (r) => r.lambda_jobs_per_sec,
    edge_jobs_per_sec: (r) => r.edge_jobs_per_sec,
    edge_cpu_ms_per_job: (r) => r.edge_cpu_ms_per_job,
    usd_per_million_jobs: (r) => r.usd_per_million_jobs,
  },
  check: (r) => r.lambda_ok && r.edge_ok,
};
