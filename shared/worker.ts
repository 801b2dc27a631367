import type { z } from "zod";
import { retryDelayMs } from "./backoff.ts";
import { claimJobs, suspectWaiting, type ClaimedJob } from "./claim.ts";
import type { Store } from "./db.ts";
import { enqueue, enqueueClaimed } from "./enqueue.ts";
import { PrefetchGauge } from "./prefetch.ts";
import type { EnqueueOptions, JobContext, JobType, Registry } from "./job.ts";
import { extendLease } from "./settle.ts";
import { Settler, type SettleOutcome } from "./settler.ts";

/**
 * The runner's loop, with no Lambda in it: claim jobs in batches into a fixed
 * number of slots, run each under an AbortSignal that fires at its lease
 * deadline, settle outcomes in batches, and keep going while there is work and
 * time. The Lambda runner and the benchmarks both run exactly this.
 */

export interface WorkerLog {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export interface WorkerOptions {
  store: Store;
  registry: Registry;
  /** Served in turn; a claim takes from one queue at a time. */
  queues: readonly string[];
  runnerId: string;
  /** Jobs run at once. */
  slots: number;
  /**
   * Jobs claimed ahead of the free slots. Default: adaptive (`PrefetchGauge`):
   * what the slots will finish while the next claim is under way; none for
   * slow jobs, so other runners can take them.
   */
  prefetch?: number;
  /** Time left before the runner must be gone; default: no limit. */
  remainingMs?: () => number;
  /** Kept back from `remainingMs` for settling and closing. */
  marginMs?: number;
  /** Exit after this long with nothing to claim and nothing running. */
  idleMs?: number;
  /** Wait between claims that found nothing. */
  pollMs?: number;
  log?: WorkerLog;
  /** Called for every settled attempt, e.g. to publish metrics. */
  onSettled?: (event: SettledEvent) => void;
}

export interface SettledEvent {
  jobId: string;
  queue: string;
  name: string;
  attempt: number;
  outcome: SettleOutcome;
  /** False when fencing refused it: the lease had been lost. */
  accepted: boolean;
  /** The job's status after an accepted failure or timeout. */
  status?: "queued" | "dead";
  durationMs: number;
}

export interface WorkerSummary {
  claimed: number;
  succeeded: number;
  failed: number;
  timedOut: number;
  released: number;
  /** Settles refused by fencing: the lease had been lost. */
  stale: number;
}

/** How often a runner looks for suspects waiting to run alone. */
export const SUSPECT_CHECK_MS = 1_000;

const silent: WorkerLog = { info() {}, warn() {}, error() {} };

export async function runWorker(options: WorkerOptions): Promise<WorkerSummary> {
  const { store, registry, queues, runnerId, slots } = options;
  const gauge = new PrefetchGauge(slots);
  const prefetch = () => options.prefetch ?? gauge.size();
  const remainingMs = options.remainingMs ?? (() => Number.POSITIVE_INFINITY);
  const marginMs = options.marginMs ?? 0;
  const idleMs = options.idleMs ?? 2_000;
  const pollMs = options.pollMs ?? 200;
  const log = options.log ?? silent;
  const summary: WorkerSummary = { claimed: 0, succeeded: 0, failed: 0, timedOut: 0, released: 0, stale: 0 };

  const buffer: { job: ClaimedJob; deadline: number }[] = [];
  const running = new Set<Promise<void>>();
  const started = new Map<string, { queue: string; name: string; attempt: number; at: number }>();
  let wake: (() => void) | null = null;
  let wakeRequested = false;
  // The loop waits for a free slot (not for new work): a finishing job wakes it.
  let waitingForSlot = false;
  let queueTurn = 0;
  let lastWorkAt = Date.now();

  const settler = new Settler(
    store,
    (lease, outcome, accepted, status) => {
      const info = started.get(lease.id);
      started.delete(lease.id);
      const durationMs = info ? Date.now() - info.at : 0;
      const fields = { jobId: lease.id, attempt: info?.attempt, runnerId, outcome, durationMs, name: info?.name };
      if (!accepted) {
        summary.stale++;
        log.warn("stale settle refused: lease lost", fields);
      } else if (outcome === "succeeded") {
        summary.succeeded++;
      } else if (outcome === "failed") {
        summary.failed++;
      } else if (outcome === "timeout") {
        summary.timedOut++;
      } else {
        summary.released++;
      }
      if (accepted && outcome !== "succeeded") log.info(`job ${outcome}`, { ...fields, status });
      options.onSettled?.({
        jobId: lease.id, queue: info?.queue ?? "", name: info?.name ?? "", attempt: info?.attempt ?? 0,
        outcome, accepted, status, durationMs,
      });
    },
    (err) => log.error("settle failed; the rescuer will record these attempts", { error: String(err) }),
  );

  const served = new Set(queues);
  // The last claim found the queue drained: a follow-up job jumps no queue.
  let drained = false;
  // Suspects (jobs whose runner died holding them) run alone: the runner
  // stops claiming, lets what it holds finish, then runs one suspect with
  // nothing beside it, so a job that kills its runner takes no other job's
  // attempt with it. It looks for suspects at most every SUSPECT_CHECK_MS.
  let isolating = false;
  let suspectRunning: string | null = null;
  let suspectCheckAt = 0;
  const follow = async <S extends z.ZodType>(type: JobType<S>, payload: z.input<S>, opts?: EnqueueOptions) => {
    const queue = opts?.queue ?? type.queue;
    const now = served.has(queue) && !opts?.runAt && !opts?.delayMs;
    // Hand-off: nothing waits here, the queue is drained, and the lease fits,
    // so the job is inserted already claimed by this runner and starts as soon
    // as a slot is free (the one its parent is about to leave), with no claim
    // round trip. Invariants hold: the insert is the claim.
    if (now && !opts?.dedupeKey && drained && buffer.length === 0 && !isolating && suspectRunning === null &&
        type.leaseMs <= remainingMs() - marginMs) {
      const sentAt = Date.now();
      const job = await enqueueClaimed(store, { type, payload, options: opts }, runnerId);
      summary.claimed++;
      buffer.unshift({ job, deadline: sentAt + job.leaseMs });
      pump();
      return { id: job.id, existing: false };
    }
    const result = await enqueue(store, type, payload, opts);
    if (now) {
      wakeRequested = true;
      wake?.();
    }
    return result;
  };

  const run = async (job: ClaimedJob, deadline: number) => {
    const lease = { id: job.id, leaseToken: job.leaseToken };
    started.set(job.id, { queue: job.queue, name: job.name, attempt: job.attempts, at: Date.now() });
    const type = registry.get(job.name);
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => {
        controller.abort(new Error(`lease of ${job.leaseMs}ms expired`));
        resolve("timeout");
      }, Math.max(0, deadline - Date.now()));
    });
    try {
      if (!type) throw new Error(`unknown job type: ${job.name}`);
      const payload = (type.schema as z.ZodType).parse(job.payload);
      const ctx: JobContext = {
        jobId: job.id, attempt: job.attempts, maxAttempts: job.maxAttempts, leaseToken: job.leaseToken,
        signal: controller.signal, runnerId, enqueue: follow,
      };
      const startedAt = performance.now();
      const result = await Promise.race([Promise.resolve().then(() => type.handler(payload, ctx)), timedOut]);
      gauge.jobTook(performance.now() - startedAt);
      if (result === "timeout" || Date.now() >= deadline) {
        settler.fail({ ...lease, outcome: "timeout", error: `timeout: handler ran past its ${job.leaseMs}ms lease`, retryDelayMs: retryDelayMs(job.attempts, job.backoffMs) });
      } else {
        settler.succeed(lease);
      }
    } catch (err) {
      const error = err instanceof Error ? `${err.stack ?? err.message}` : String(err);
      settler.fail({ ...lease, outcome: "failed", error, retryDelayMs: retryDelayMs(job.attempts, job.backoffMs) });
    } finally {
      clearTimeout(timer);
    }
  };

  // Starts buffered jobs while slots are free. A job held in the buffer for
  // over half its lease is renewed first if the invocation can still cover a
  // full lease, else given back uncharged; the renewal holds its slot.
  function pump() {
    while (running.size < slots && buffer.length > 0) {
      const { job, deadline } = buffer.shift()!;
      const p = (async () => {
        let jobDeadline = deadline;
        if (deadline - Date.now() < job.leaseMs / 2) {
          const sentAt = Date.now();
          const renewed =
            job.leaseMs <= remainingMs() - marginMs ? await extendLease(store, job, job.leaseMs).catch(() => null) : null;
          if (!renewed) {
            started.set(job.id, { queue: job.queue, name: job.name, attempt: job.attempts, at: Date.now() });
            settler.release(job);
            return;
          }
          jobDeadline = sentAt + job.leaseMs;
        }
        await run(job, jobDeadline);
      })().finally(() => {
        running.delete(p);
        if (job.id === suspectRunning) suspectRunning = null;
        pump();
        if (waitingForSlot) wake?.();
      });
      running.add(p);
    }
  }

  for (;;) {
    pump();
    const maxLeaseMs = remainingMs() - marginMs;
    if (maxLeaseMs <= 0) break;
    if (!isolating && suspectRunning === null && Date.now() >= suspectCheckAt) {
      suspectCheckAt = Date.now() + SUSPECT_CHECK_MS;
      isolating = await suspectWaiting(store, queues, maxLeaseMs);
    }
    let claimed = 0;
    if (isolating && running.size === 0 && buffer.length === 0) {
      isolating = false;
      for (let tried = 0; tried < queues.length && claimed === 0; tried++) {
        const queue = queues[queueTurn++ % queues.length]!;
        const sentAt = Date.now();
        const [job] = await claimJobs(store, { queue, runnerId, limit: 1, maxLeaseMs, suspects: true });
        if (!job) continue;
        claimed = 1;
        summary.claimed++;
        suspectRunning = job.id;
        buffer.push({ job, deadline: sentAt + job.leaseMs });
      }
      if (claimed > 0) {
        lastWorkAt = Date.now();
        continue;
      }
    }
    // Claim once the buffer runs low: enough to fill every slot, plus the
    // prefetch; nothing while a suspect runs or is about to.
    const ahead = prefetch();
    const want = isolating || suspectRunning !== null ? 0
      : buffer.length <= Math.max(slots, ahead) / 2 ? slots + ahead - running.size - buffer.length : 0;
    if (want > 0) {
      wakeRequested = false;
      for (let tried = 0; tried < queues.length && claimed === 0; tried++) {
        const queue = queues[queueTurn++ % queues.length]!;
        const sentAt = Date.now();
        const sent = performance.now();
        const jobs = await claimJobs(store, { queue, runnerId, limit: want, maxLeaseMs });
        gauge.claimTook(performance.now() - sent);
        claimed = jobs.length;
        drained = claimed < want;
        summary.claimed += claimed;
        for (const job of jobs) buffer.push({ job, deadline: sentAt + job.leaseMs });
      }
      if (claimed > 0) lastWorkAt = Date.now();
    }
    // A follow-up job asks for a claim at once, but only with room to claim
    // into; with every slot and the buffer full, wait below for a slot.
    if (claimed > 0 || (wakeRequested && want > 0)) continue;
    if (running.size === 0 && buffer.length === 0 && Date.now() - lastWorkAt >= idleMs) break;
    if (running.size > 0) lastWorkAt = Date.now();
    // Nothing to claim, or every slot busy: wait for a slot, a follow-up job, or the poll.
    waitingForSlot = want <= 0;
    await new Promise<void>((resolve) => {
      const idle = running.size === 0 && buffer.length === 0;
      const untilIdle = idleMs - (Date.now() - lastWorkAt);
      const waitMs = want <= 0 ? Math.max(pollMs, 1_000) : idle ? Math.min(pollMs, Math.max(untilIdle, 0) + 1) : pollMs;
      const timer = setTimeout(() => { wake = null; resolve(); }, waitMs);
      wake = () => { clearTimeout(timer); wake = null; resolve(); };
    });
  }

  // Out of time or idle: give back what never started, let running jobs finish
  // (each is bounded by its lease), write every outcome.
  for (const { job } of buffer.splice(0)) {
    started.set(job.id, { queue: job.queue, name: job.name, attempt: job.attempts, at: Date.now() });
    settler.release(job);
  }
  while (running.size > 0) await Promise.race(running);
  await settler.drain();
  return summary;
}
