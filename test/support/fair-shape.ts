import * as z from "zod";
import type { Store } from "../../shared/db/db.ts";
import { enqueueJobs, job } from "../../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../../shared/jobs/job.ts";
import { pause } from "../../shared/runner/clock.ts";
import { runWorker } from "../../shared/runner/worker.ts";
import { ManualClock, runOn, watched } from "./clock.ts";

/**
 * One workload shape for the fair claim: one tenant ("big") has a backlog,
 * the runners are busy with it, then small tenants arrive, all at once
 * (`burst`: `perTenant` jobs each) or one job each per round, a job's
 * duration apart (`trickle`). Every job's handler start is recorded, in
 * order (the oracle: which big jobs started between a small job's arrival
 * and its own start) and at its time on the runners' clock; once every small
 * job has started (or the time allowed is over), the rest of the backlog
 * ends at once, so a fair run costs about the small jobs' wait.
 *
 * The runners run on a ManualClock (support/clock.ts `runOn`): a handler's
 * `jobMs` and the trickle's gaps are waits on it, and it moves to the next
 * timer only when no query is in flight, so a wait is the clock's, never a
 * loaded host's, and the order of starts is the claim's doing alone.
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
  /** On the runners' clock. */
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

export async function runShape(store: Store, queue: string, s: Shape, o: { fair: boolean; timeAllowedMs: number }): Promise<ShapeRun> {
  const clock = new ManualClock(Date.now());
  const w = watched(store);
  /** Each job's handler starts: their place in the order of all starts, and their time. */
  const starts = new Map<string, { seq: number; at: number }[]>();
  const bigStarts: number[] = [];
  let seq = 0;
  let stop!: () => void;
  const stopped = new Promise<void>((r) => (stop = r));
  let stopping = false;
  const backlog = backlogFor(s);
  const busy = Math.min(backlog, s.runners * s.slots);
  let allBusy!: () => void;
  const slotsBusy = new Promise<void>((r) => (allBusy = r));
  const small: { id: string; tenant: string; rank: number; enqueuedAt: number; enqueuedSeq: number }[] = [];
  let expected = 0;
  let smallStarted!: () => void;
  const allSmallStarted = new Promise<void>((r) => (smallStarted = r));
  const checkSmall = () => {
    if (small.length === expected && small.every((j) => starts.has(j.id))) smallStarted();
  };
  const type = defineJob({
    name: `shape-${queue}`, schema: z.object({ tenant: z.string() }), queue, leaseMs: 60_000,
    handler: async (payload, ctx) => {
      const start = { seq: seq++, at: clock.now() };
      starts.set(ctx.jobId, [...(starts.get(ctx.jobId) ?? []), start]);
      if (payload.tenant === "big") {
        bigStarts.push(start.seq);
        if (bigStarts.length >= busy) allBusy();
      } else checkSmall();
      if (!stopping) await Promise.race([new Promise<void>((r) => clock.after(s.jobMs, r)), stopped]);
    },
  });
  const bigIds = (await enqueueJobs(store, Array.from({ length: backlog }, () => job(type, { tenant: "big" }, { group: "big" })))).map((j) => j.id);

  const tenants = Array.from({ length: s.smallTenants }, (_, t) => `small-${t + 1}`);
  expected = tenants.length * s.perTenant;
  const arrive = async (rank: number, count: number) => {
    const specs = tenants.flatMap((tenant) => Array.from({ length: count }, () => job(type, { tenant }, { group: tenant })));
    const ids = await enqueueJobs(w, specs);
    // Committed: no claim before this could have seen them.
    const at = clock.now();
    const enqueuedSeq = seq;
    ids.forEach((j, i) => small.push({ id: j.id, tenant: specs[i]!.payload.tenant, rank: rank + (i % count), enqueuedAt: at, enqueuedSeq }));
  };
  const scenario = async () => {
    const workers = Array.from({ length: s.runners }, (_, r) => runWorker({
      linger: "fixed", clock,
      store: w, registry: createRegistry([type]), queues: [queue], runnerId: `${queue}-${r}`, slots: s.slots, prefetch: s.prefetch,
      idleMs: 300, pollMs: 10, fair: o.fair,
    }));
    // Arrivals start once every slot is busy with the backlog.
    await slotsBusy;
    const allowed = pause(clock, o.timeAllowedMs);
    if (s.arrivals === "burst") await arrive(1, s.perTenant);
    else {
      for (let rank = 1; rank <= s.perTenant; rank++) {
        await arrive(rank, 1);
        if (rank < s.perTenant) await pause(clock, Math.max(s.jobMs, 5)).done;
      }
    }
    checkSmall();
    await Promise.race([allSmallStarted, allowed.done]);
    allowed.wake();
    notStarted = small.filter((j) => !starts.has(j.id)).length;
    stopping = true;
    stop();
    return Promise.all(workers);
  };
  let notStarted = 0;
  const summaries = await runOn(clock, w, scenario());
  const waits = small.filter((j) => starts.has(j.id)).map((j) => {
    const first = starts.get(j.id)![0]!;
    return {
      tenant: j.tenant, rank: j.rank, waitMs: first.at - j.enqueuedAt,
      bigStartedAhead: bigStarts.filter((b) => b >= j.enqueuedSeq && b < first.seq).length,
    };
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
