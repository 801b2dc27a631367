import { z } from "zod";
import type { Store } from "../../shared/db/db.ts";
import { enqueueJobs, job } from "../../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../../shared/jobs/job.ts";
import { runWorker } from "../../shared/runner/worker.ts";

/**
 * One workload shape for the fair claim: one tenant ("big") has a backlog,
 * the runners are busy with it, then small tenants arrive, all at once
 * (`burst`: `perTenant` jobs each) or one job each per round, a job's
 * duration apart (`trickle`). Every job's handler start is recorded; once
 * every small job has started (or the time allowed is over), the rest of
 * the backlog ends at once, so a fair run costs about the small jobs' wait.
 */
export interface Shape {
  jobMs: number;
  /** Per runner. */
  slots: number;
  /** Jobs claimed ahead of the free slots, per runner (0: none). */
  prefetch: number;
  arrivals: "burst" | "trickle";
  runners: number;
  smallTenants: number;
  /** Jobs per small tenant. */
  perTenant: number;
}

export interface SmallJobWait {
  tenant: string;
  /** 1 for a tenant's first job. */
  rank: number;
  waitMs: number;
  /** Big jobs whose handler started after this job was enqueued and before its own. */
  bigStartedAhead: number;
}

export interface ShapeRun {
  waits: SmallJobWait[];
  /** Small jobs that had not started when the time allowed ran out. */
  notStarted: number;
  bigJobs: number;
  /** Jobs whose handler started more than once, and jobs that never started. */
  startedTwice: number;
  neverStarted: number;
  succeeded: number;
}

export const shapeName = (s: Shape) =>
  `${s.jobMs} ms jobs, ${s.runners} runner(s) of ${s.slots} slots, prefetch ${s.prefetch}, ${s.arrivals} of ${s.smallTenants}×${s.perTenant}`;

/** The groups a small tenant's job of `rank` can find ahead of it in turn: every group's, once per rank. */
export const groupsAhead = (s: Shape, rank: number) => rank * (s.smallTenants + 1);

/**
 * Big jobs a fair claim may start while a small job of `rank` waits: what
 * the runners buffer when it arrives and one claim of every runner, then
 * one more claim per round of the turn, and one job of every group per round.
 */
export const bigAllowance = (s: Shape, rank: number) => (rank + 1) * s.runners * (s.slots + s.prefetch) + groupsAhead(s, rank);

/**
 * The wait a fair claim allows: a job duration per round of the turn the
 * runners' slots take to reach it, plus one for the buffer and one for the
 * slot to free, and `slackMs` for a loaded host.
 */
export const waitAllowanceMs = (s: Shape, rank: number, slackMs: number) =>
  s.jobMs * (Math.ceil(groupsAhead(s, rank) / (s.runners * s.slots)) + Math.ceil(s.prefetch / s.slots) + 1) + slackMs;

/** Large enough that a claim that ignores groups starts four times the allowance ahead of every small job. */
export const backlogFor = (s: Shape) => 4 * bigAllowance(s, s.perTenant) + s.runners * (s.slots + s.prefetch);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runShape(store: Store, queue: string, s: Shape, o: { fair: boolean; timeAllowedMs: number }): Promise<ShapeRun> {
  const starts = new Map<string, number[]>();
  let bigStarts: number[] = [];
  let stop!: () => void;
  const stopped = new Promise<void>((r) => (stop = r));
  let stopping = false;
  const type = defineJob({
    name: `shape-${queue}`, schema: z.object({ tenant: z.string() }), queue, leaseMs: 60_000,
    handler: async (payload, ctx) => {
      const at = performance.now();
      starts.set(ctx.jobId, [...(starts.get(ctx.jobId) ?? []), at]);
      if (payload.tenant === "big") bigStarts.push(at);
      if (!stopping) await Promise.race([sleep(s.jobMs), stopped]);
    },
  });
  const backlog = backlogFor(s);
  const bigIds = (await enqueueJobs(store, Array.from({ length: backlog }, () => job(type, { tenant: "big" }, { group: "big" })))).map((j) => j.id);
  const workers = Array.from({ length: s.runners }, (_, r) => runWorker({
    linger: "fixed",
    store, registry: createRegistry([type]), queues: [queue], runnerId: `${queue}-${r}`, slots: s.slots, prefetch: s.prefetch,
    idleMs: 300, pollMs: 10, fair: o.fair,
  }));
  // Arrivals start once every slot is busy with the backlog.
  const busy = Math.min(backlog, s.runners * s.slots);
  while (bigStarts.length < busy) await sleep(2);

  const small: { id: string; tenant: string; rank: number; enqueuedAt: number }[] = [];
  const tenants = Array.from({ length: s.smallTenants }, (_, t) => `small-${t + 1}`);
  const arrive = async (rank: number, count: number) => {
    const specs = tenants.flatMap((tenant) => Array.from({ length: count }, () => job(type, { tenant }, { group: tenant })));
    const ids = await enqueueJobs(store, specs);
    const at = performance.now(); // committed: no claim before this could have seen them
    ids.forEach((j, i) => small.push({ id: j.id, tenant: specs[i]!.payload.tenant, rank: rank + (i % count), enqueuedAt: at }));
  };
  const arrivedAt = performance.now();
  if (s.arrivals === "burst") await arrive(1, s.perTenant);
  else {
    for (let rank = 1; rank <= s.perTenant; rank++) {
      await arrive(rank, 1);
      if (rank < s.perTenant) await sleep(Math.max(s.jobMs, 5));
    }
  }
  while (performance.now() - arrivedAt < o.timeAllowedMs && !small.every((j) => starts.has(j.id))) await sleep(5);
  const notStarted = small.filter((j) => !starts.has(j.id)).length;
  stopping = true;
  stop();
  const summaries = await Promise.all(workers);
  bigStarts = bigStarts.sort((a, b) => a - b);
  const startedBetween = (from: number, to: number) => bigStarts.filter((t) => t > from && t < to).length;
  const waits = small.filter((j) => starts.has(j.id)).map((j) => {
    const at = starts.get(j.id)![0]!;
    return { tenant: j.tenant, rank: j.rank, waitMs: at - j.enqueuedAt, bigStartedAhead: startedBetween(j.enqueuedAt, at) };
  });
  const all = [...bigIds, ...small.map((j) => j.id)];
  return {
    waits,
    notStarted,
    bigJobs: backlog,
    startedTwice: all.filter((id) => (starts.get(id)?.length ?? 0) > 1).length,
    neverStarted: all.filter((id) => !starts.has(id)).length,
    succeeded: summaries.reduce((n, w) => n + w.succeeded, 0),
  };
}
