import type { z } from "zod";
import { retryDelayMs } from "./backoff.ts";
import { enqueue, enqueueClaimed } from "./enqueue.ts";
import { chosenFlowControl } from "./flow-control.ts";
import type { EnqueueOptions, JobType } from "./job.ts";
import { PrefetchGauge } from "./prefetch.ts";
import { pause, systemClock } from "./runner/clock.ts";
import { Completer, type SettleKind } from "./runner/completer.ts";
import { executeJob } from "./runner/executor.ts";
import { Linger } from "./runner/linger.ts";
import { Producer, type Buffered } from "./runner/producer.ts";
import { workerPacing, type SettleOutcome, type WorkerLog, type WorkerOptions, type WorkerSummary } from "./runner/options.ts";

export type { SettledEvent, SettleOutcome, WorkerLog, WorkerOptions, WorkerSummary } from "./runner/options.ts";

/**
 * The runner's loop, with no Lambda in it. Three parts, each on its own:
 * the producer claims into a buffer, the executor runs one job under its
 * deadline, the completer writes outcomes in batches and retries them. This
 * loop only wires them: it starts buffered jobs in free slots, asks for more
 * when the buffer runs low, and stops when the queue is drained, time is up,
 * or the database has been gone too long. On every exit it gives back what
 * never started, waits for its handlers, and writes every outcome it can.
 * The Lambda runner and the benchmarks both run exactly this.
 */

const silent: WorkerLog = { info() {}, warn() {}, error() {} };

/** The shortest wait before claiming again at a rate limit window's opening: never a busy loop. */
const RATE_RECHECK_MIN_MS = 5;
/**
 * A runner stays for a rate limit window that opens within this long (or its
 * linger, if longer): sooner than a scheduler could start another runner for
 * it, and a stream under a limit of a few per second keeps one runner, not one
 * per window. A later window is the scheduler's (functions/scheduler.ts).
 */
export const RATE_STAY_MS = 10_000;

export async function runWorker(options: WorkerOptions): Promise<WorkerSummary> {
  const { store, registry, queues, runnerId, slots } = options;
  const clock = options.clock ?? systemClock;
  const gauge = new PrefetchGauge(slots);
  const prefetch = () => options.prefetch ?? gauge.size();
  const remainingMs = options.remainingMs ?? (() => Number.POSITIVE_INFINITY);
  const marginMs = options.marginMs ?? 0;
  const maxLeaseMs = () => Math.min(remainingMs() - marginMs, options.maxLeaseMs ?? Number.POSITIVE_INFINITY);
  // The config's defaults (shared/config.ts) where the options say nothing, as a deployed runner gets them.
  const pacing = workerPacing(options);
  const { idleMs, pollMs } = pacing;
  // Adaptive: an isolated job's runner leaves after one poll; a stream keeps it (runner/linger.ts).
  // A `Linger` given in remembers the arrivals earlier runs saw (a warm Lambda environment's).
  const linger = pacing.linger instanceof Linger ? pacing.linger : new Linger(clock, { minMs: pollMs, maxMs: idleMs });
  const lingerMs = () => (pacing.linger === "fixed" ? idleMs : linger.ms());
  const log = options.log ?? silent;
  const summary: WorkerSummary = {
    claimed: 0, succeeded: 0, failed: 0, timedOut: 0, released: 0, slept: 0, stale: 0, leftQueued: 0, exit: "idle",
  };
  // Jobs whose last outcome here put them back in the queue (a retry, a release).
  const leftQueued = new Set<string>();

  const running = new Set<Promise<void>>();
  const held = new Map<string, { queue: string; name: string; attempt: number; run: number; at: number; outcome?: SettleOutcome }>();
  let wake: (() => void) | null = null;
  const nudge = () => wake?.();
  // The loop waits for a free slot (not for new work): a finishing job wakes it.
  let waitingForSlot = false;

  const completer = new Completer({
    store,
    clock,
    onSettled: ({ lease, kind, accepted, status, abandoned }) => settled(lease.id, kind, accepted, status, abandoned),
    onWriteError: (err, transient) =>
      log.warn("settle write failed; retrying while the leases last", { error: String(err), transient }),
  });
  const producer = new Producer({
    store, clock, queues, runnerId,
    names: [...registry.keys()], fair: pacing.fair,
    limited: [...registry.values()].some((type) => type.concurrency !== undefined),
    rated: [...registry.values()].some((type) => type.rateLimit !== undefined),
    until: () => clock.now() + remainingMs() - marginMs,
    onRetry: (err, tryNumber, waitMs) => log.warn("database error; retrying", { error: String(err), tryNumber, waitMs }),
  });

  function settled(id: string, kind: SettleKind, accepted: boolean, status?: "queued" | "dead", abandoned?: boolean) {
    const info = held.get(id);
    held.delete(id);
    const outcome = kind === "failed" ? (info?.outcome ?? "failed") : kind;
    const durationMs = info ? clock.now() - info.at : 0;
    // Built only for a line that is logged: most outcomes are quiet successes.
    const fields = () => ({ jobId: id, attempt: info?.attempt, run: info?.run, runnerId, outcome, durationMs, name: info?.name });
    if (!accepted) {
      summary.stale++;
      log.warn(abandoned ? "settle abandoned: lease ran out while the database was unreachable" : "stale settle refused: lease lost", fields());
    } else if (outcome === "succeeded") summary.succeeded++;
    else if (outcome === "failed") summary.failed++;
    else if (outcome === "timeout") summary.timedOut++;
    else if (outcome === "slept") summary.slept++;
    else summary.released++;
    if (accepted && outcome !== "succeeded" && outcome !== "released" && outcome !== "slept") log.info(`job ${outcome}`, { ...fields(), status });
    if (accepted && (outcome === "released" || outcome === "slept" || status === "queued")) leftQueued.add(id);
    else if (accepted) leftQueued.delete(id);
    if (accepted && status === "dead") options.onDead?.([id]);
    options.onSettled?.({
      jobId: id, queue: info?.queue ?? "", name: info?.name ?? "", attempt: info?.attempt ?? 0, run: info?.run ?? 0,
      outcome, accepted, status, durationMs,
    });
    // Slots held back while outcomes piled up may start again.
    pump();
  }

  const hold = (b: Buffered) => held.set(b.job.id, { queue: b.job.queue, name: b.job.name, attempt: b.job.attempts, run: b.job.run, at: clock.now() });
  const release = (b: Buffered) => {
    hold(b);
    completer.release({ ...b.job, deadline: b.deadline });
  };

  // Suspects (jobs whose runner died holding them on their next-to-last
  // attempt) run alone: the runner stops claiming, lets what it holds
  // finish, then runs suspects one at a time with nothing beside them.
  const suspectMode = options.suspects ?? "alone";
  let isolating = suspectMode === "only";
  let suspectRunning = false;

  const follow = async <S extends z.ZodType>(type: JobType<S>, payload: z.input<S>, opts?: EnqueueOptions) => {
    const queue = opts?.queue ?? type.queue;
    // A debounced job starts a period from now: a follow-up for later.
    const { debounce, throttle } = chosenFlowControl(type, opts ?? {});
    const now = queues.includes(queue) && !opts?.runAt && !opts?.delayMs && !debounce;
    // Hand-off: nothing waits here, the queue is drained, and the lease fits,
    // so the job is inserted already claimed by this runner and starts as soon
    // as a slot is free, with no claim round trip. The insert is the claim.
    if (now && !opts?.dedupeKey && !throttle && producer.drained && producer.buffer.length === 0 && !isolating && !suspectRunning &&
        registry.has(type.name) && type.leaseMs <= maxLeaseMs() && !type.concurrency && !type.rateLimit /* only the claim admits these */) {
      const sentAt = clock.now();
      const job = await enqueueClaimed(store, { type, payload, options: opts }, runnerId, options.limits);
      summary.claimed++;
      producer.buffer.unshift({ job, deadline: sentAt + job.leaseMs });
      pump();
      return { id: job.id, existing: false };
    }
    const result = await enqueue(store, type, payload, opts, options.limits);
    if (now) {
      wakeRequested = true;
      nudge();
    } else {
      options.onFollowUp?.();
    }
    return result;
  };
  let wakeRequested = false;

  // One buffered job in one slot: made fit to start, its start recorded
  // (before the handler for a job that owes an attempt, else in the next
  // write), run, and its outcome handed to the completer.
  async function runSlot(b: Buffered): Promise<void> {
    const { job } = b;
    const type = registry.get(job.name);
    const deadline = type ? (producer.fresh(b) ?? (await producer.renew(b, maxLeaseMs()))) : null;
    if (deadline === null) return release(b);
    const lease = { id: job.id, leaseToken: job.leaseToken, deadline };
    hold(b);
    if (job.startFirst) {
      if (!(await completer.recordStart(lease))) return void held.delete(job.id);
    } else {
      completer.markStarted(lease);
    }
    const startedAt = performance.now();
    const result = await executeJob({
      job, type: type!, deadline, clock, context: { runnerId, enqueue: follow }, maxResultBytes: options.limits?.maxPayloadBytes, store,
      recordStep: (record) => completer.recordStep({ ...record, deadline }),
    });
    gauge.jobTook(performance.now() - startedAt);
    const info = held.get(job.id);
    if (info) info.outcome = result.outcome;
    if (result.outcome === "succeeded") return completer.succeed({ ...lease, result: result.result, steps: result.steps });
    if (result.outcome === "slept") return completer.sleep({ ...lease, runAt: result.runAt, steps: result.steps });
    completer.fail({
      ...lease, outcome: result.outcome, error: result.error, permanent: result.permanent, steps: result.steps,
      retryDelayMs: retryDelayMs(job.attempts, job.backoffMs),
    });
  }

  // Starts buffered jobs while slots are free, unless outcomes are piling
  // up unwritten (the database is not answering): then it waits for them.
  function pump() {
    while (!stopping && running.size < slots && producer.buffer.length > 0 && maxLeaseMs() > 0 &&
           !(completer.unhealthy() && completer.backlog() >= slots)) {
      const b = producer.buffer.shift()!;
      const p: Promise<void> = runSlot(b).then(
        () => slotFreed(p),
        (err) => {
          log.error("runner slot failed; the lease will be rescued", { jobId: b.job.id, error: String(err) });
          held.delete(b.job.id);
          slotFreed(p);
        },
      );
      running.add(p);
    }
  }

  function slotFreed(p: Promise<void>) {
    running.delete(p);
    pump();
    if (waitingForSlot) nudge();
  }

  let lastWorkAt = Math.max(clock.now(), options.waitUntil ?? 0);
  let stopping = false;
  try {
    for (;;) {
      pump();
      if (maxLeaseMs() <= 0) {
        summary.exit = "time";
        break;
      }
      let claimed = 0;
      if (isolating && running.size === 0 && producer.buffer.length === 0) {
        // Run suspects alone, one after the other, until none is left.
        claimed = (await producer.claim(1, maxLeaseMs(), true)).length;
        summary.claimed += claimed;
        suspectRunning = claimed > 0;
        if (claimed === 0) isolating = suspectMode === "only";
        else {
          pump();
          await Promise.all(running);
          suspectRunning = false;
          await completer.drain();
          if (suspectMode === "alone") isolating = await producer.suspectWaiting(maxLeaseMs(), true);
          lastWorkAt = clock.now();
          continue;
        }
      }
      // Claim once the buffer runs low: enough to fill every slot, plus the
      // prefetch; nothing while suspects wait to run alone.
      const ahead = prefetch();
      const buffered = producer.buffer.length;
      const want = isolating ? 0 : buffered <= Math.max(slots, ahead) / 2 ? slots + ahead - running.size - buffered : 0;
      if (want > 0) {
        wakeRequested = false;
        const idleBefore = running.size === 0 && producer.buffer.length === 0;
        const sent = performance.now();
        claimed = (await producer.claim(want, maxLeaseMs(), false, Math.max(0, slots - running.size - buffered))).length;
        gauge.claimTook(performance.now() - sent);
        if (claimed > 0 && (idleBefore || summary.claimed === 0)) linger.arrived();
        summary.claimed += claimed;
        if (claimed > 0) lastWorkAt = clock.now();
      }
      // Suspects waiting? After the claim, which says so itself when it
      // brings jobs: no round trip of its own while a runner is busy. They
      // run alone once what this runner holds has finished (at the top).
      if (suspectMode === "alone" && !isolating && !suspectRunning && (await producer.suspectWaiting(maxLeaseMs()))) {
        isolating = true;
        continue;
      }
      // A follow-up job asks for a claim at once, but only with room to claim
      // into; with every slot and the buffer full, wait for a slot.
      if (claimed > 0 || (wakeRequested && want > 0)) continue;
      // Jobs held back by a rate limit: claimed again as their window opens,
      // and worth staying for when it opens within the linger.
      const opensInMs = want > 0 && running.size < slots ? await producer.rateOpensInMs(maxLeaseMs()) : null;
      if (opensInMs !== null && opensInMs <= Math.max(lingerMs(), RATE_STAY_MS)) lastWorkAt = clock.now();
      const idle = running.size === 0 && producer.buffer.length === 0;
      if (idle && clock.now() - lastWorkAt >= lingerMs()) break;
      if (!idle) lastWorkAt = clock.now();
      const untilIdle = lingerMs() - (clock.now() - lastWorkAt);
      const baseWaitMs = want <= 0 && !idle ? Math.max(pollMs, 1_000) : idle ? Math.min(pollMs, Math.max(untilIdle, 0) + 1) : pollMs;
      // Held only by a window: sleep until it opens, not a poll at a time.
      const waitMs = opensInMs === null ? baseWaitMs
        : Math.max(RATE_RECHECK_MIN_MS, idle ? opensInMs : Math.min(baseWaitMs, opensInMs));
      const p = pause(clock, waitMs);
      waitingForSlot = want <= 0;
      wake = p.wake;
      await p.done;
      wake = null;
    }
  } catch (err) {
    // The database was gone for longer than the runner could wait, or
    // refused a claim outright: stop cleanly, never crash.
    summary.exit = "database";
    log.error("runner stopping: the database could not be reached", { error: String(err) });
  }

  // Give back what never started, let running jobs finish (each is bounded
  // by its lease), and write every outcome that can still be written.
  stopping = true;
  for (const b of producer.buffer.splice(0)) release(b);
  while (running.size > 0) await Promise.race(running);
  await completer.drain();
  summary.leftQueued = leftQueued.size;
  return summary;
}
