import * as z from "zod";
import type { Store } from "../shared/db/db.ts";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { withLeaseholdDb } from "./db.ts";
import type { Phase } from "./phases.ts";
import { round } from "./stats.ts";

/**
 * Fair claiming, in process with the real runner: one tenant has `bigJobs`
 * ready jobs; `smallTenants` others each enqueue one job every `smallEveryMs`
 * until each has enqueued `smallJobs`, while it drains. Each handler waits
 * `jobMs`. The same workload runs with the claim that ignores groups and with
 * the fair one, on the same database, one after the other (in turns by run).
 */
export interface FairTenantsParams {
  bigJobs: number;
  smallTenants: number;
  smallJobs: number;
  smallEveryMs: number;
  jobMs: number;
  slots: number;
}

export const FAIR_TENANTS: FairTenantsParams = { bigJobs: 10_000, smallTenants: 5, smallJobs: 100, smallEveryMs: 15, jobMs: 2, slots: 20 };
/** Jobs of 20 ms: the runner claims a job or two as slots free, with no prefetch to speak of. */
export const FAIR_TENANTS_20MS: FairTenantsParams = { ...FAIR_TENANTS, jobMs: 20 };
/**
 * Jobs of 200 ms: no prefetch, claims of one job. The runner finishes 100
 * jobs a second, so the backlog is 2,000 (20 s) and each small tenant
 * enqueues one job every 200 ms (5 a second, under its fair share of 100
 * over 6 groups), 20 each.
 */
export const FAIR_TENANTS_200MS: FairTenantsParams = { bigJobs: 2_000, smallTenants: 5, smallJobs: 20, smallEveryMs: 200, jobMs: 200, slots: 20 };

export interface FairTenantsRun {
  succeeded: number;
  /** Small tenants' jobs: enqueue to handler start, ms. */
  smallWaitP50Ms: number;
  smallWaitP95Ms: number;
  /** Every job, started first to last start. */
  jobsPerSecond: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(xs.length * q) - 1)]!;

export async function runFairTenants(store: Store, queue: string, fair: boolean, p: FairTenantsParams = FAIR_TENANTS): Promise<FairTenantsRun> {
  const startedAt = new Map<string, number>();
  const type = defineJob({
    name: `tenant-job-${queue}`, schema: z.object({ n: z.number() }), queue,
    handler: async (_payload, ctx) => {
      startedAt.set(ctx.jobId, Date.now());
      await sleep(p.jobMs);
    },
  });
  await enqueueJobs(store, Array.from({ length: p.bigJobs }, (_, n) => job(type, { n }, { group: "big" })));
  const t0 = Date.now();
  const worker = runWorker({
    linger: "fixed",
    store, registry: createRegistry([type]), queues: [queue], runnerId: `tenants-${queue}`, slots: p.slots, idleMs: 300, pollMs: 20, fair,
  });
  const enqueuedAt = new Map<string, number>();
  for (let round = 0; round < p.smallJobs; round++) {
    await Promise.all(Array.from({ length: p.smallTenants }, async (_, s) => {
      const at = Date.now();
      const { id } = await enqueue(store, type, { n: round }, { group: `small-${s + 1}` });
      enqueuedAt.set(id, at);
    }));
    await sleep(p.smallEveryMs);
  }
  const summary = await worker;
  const lastStart = Math.max(...startedAt.values());
  const waits = [...enqueuedAt].map(([id, at]) => (startedAt.get(id) ?? Number.POSITIVE_INFINITY) - at);
  const total = p.bigJobs + p.smallTenants * p.smallJobs;
  return {
    succeeded: summary.succeeded,
    smallWaitP50Ms: quantile(waits, 0.5),
    smallWaitP95Ms: quantile(waits, 0.95),
    jobsPerSecond: round(total / ((lastStart - t0) / 1000), 1),
  };
}

/**
 * A bench phase: both claims on one fresh database; the throughput ratio is
 * fair over unfair. Checked: the same jobs succeeded, the small tenants'
 * p95 wait within 1 s, and the fair claim at 0.9x the unfair one's throughput or better.
 */
export function fairTenants(name: string, p: FairTenantsParams): Phase {
  return {
    name,
    title: `One tenant's ${p.bigJobs.toLocaleString("en-US")} ready jobs of ${p.jobMs} ms and ${p.smallTenants} tenants ` +
      `enqueueing ${p.smallJobs} each: the claim that ignores groups, then the fair one`,
    libs: ["leasehold"],
    async run(_lib, ctx) {
      return withLeaseholdDb(ctx.adminDsn, `bench_leasehold_${name.replace(/[^a-z0-9]/g, "_")}_r${ctx.run}`, 10, async (store) => {
        // Which goes first alternates by run: the second runs on a table the first has churned.
        let unfair: FairTenantsRun;
        let fair: FairTenantsRun;
        if (ctx.run % 2 === 1) {
          unfair = await runFairTenants(store, "unfair", false, p);
          fair = await runFairTenants(store, "fair", true, p);
        } else {
          fair = await runFairTenants(store, "fair", true, p);
          unfair = await runFairTenants(store, "unfair", false, p);
        }
        return { params: p, unfair, fair, throughput_ratio: round(fair.jobsPerSecond / unfair.jobsPerSecond, 3) };
      });
    },
    metrics: {
      unfair_small_p95_ms: (r) => r.unfair.smallWaitP95Ms,
      fair_small_p95_ms: (r) => r.fair.smallWaitP95Ms,
      unfair_jobs_per_s: (r) => r.unfair.jobsPerSecond,
      fair_jobs_per_s: (r) => r.fair.jobsPerSecond,
      throughput_ratio: (r) => r.throughput_ratio,
    },
    // Exactly once only: every job of both claims ran and succeeded. The wait and
    // throughput targets are targets (bench/targets.ts, with their worst run), not checks.
    check: (r) => r.fair.succeeded === r.unfair.succeeded && r.fair.succeeded === r.params.bigJobs + r.params.smallTenants * r.params.smallJobs,
  };
}

/** The tenants case at three job durations: 2 ms (quick jobs, deep prefetch), 20 ms and 200 ms (claims of a job or two). */
export const fairTenantsPhases: Phase[] = [
  fairTenants("fair-tenants", FAIR_TENANTS),
  fairTenants("fair-tenants-20ms", FAIR_TENANTS_20MS),
  fairTenants("fair-tenants-200ms", FAIR_TENANTS_200MS),
];
