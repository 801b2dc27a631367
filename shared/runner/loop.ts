import type { RunnerParts } from "./parts.ts";
import type { WorkerSummary } from "./options.ts";
import { giveBack } from "./run-job.ts";

/** The shortest wait before claiming again at a rate limit window's opening: never a busy loop. */
const RATE_RECHECK_MIN_MS = 5;
/**
 * A runner stays for a rate limit window that opens within this long (or its
 * linger, if longer): sooner than a scheduler could start another runner for
 * it, and a stream under a limit of a few per second keeps one runner, not one
 * per window. A later window is the scheduler's (functions/scheduler.ts).
 */
export const RATE_STAY_MS = 10_000;

/**
 * A runner whose claim found work within the last poll claims again this
 * many times a poll: its queue runs dry between a stream's arrivals, and a
 * whole poll's wait would keep each arriving job half a poll on average.
 */
export const STREAM_POLLS = 5;

/**
 * The loop: starts buffered jobs, runs suspects alone when isolation says so,
 * claims when the buffer runs low, and otherwise waits a poll (a fifth of one
 * while a stream arrives, less when idle and about to leave, until a rate
 * limit window opens, or until a slot frees when it has all it can hold). It
 * ends when the queue has been empty for the linger (`idle`), or time is up
 * (`time`); it throws if the database is gone longer than the producer
 * retries.
 */
export async function claimLoop(r: RunnerParts): Promise<WorkerSummary["exit"]> {
  const { clock, producer, slots, isolation, linger } = r;
  let lastWorkAt = Math.max(clock.now(), r.options.waitUntil ?? 0);
  let foundAt = Number.NEGATIVE_INFINITY;
  for (;;) {
    slots.pump();
    if (r.maxLeaseMs() <= 0) return "time";
    if (await isolation.runAlone()) {
      lastWorkAt = clock.now();
      continue;
    }
    const want = wanted(r);
    const claimed = want > 0 ? await claimMore(r, want) : 0;
    if (claimed > 0) lastWorkAt = foundAt = clock.now();
    // Suspects waiting? After the claim, which says so itself when it brings
    // jobs: no round trip of its own while a runner is busy.
    if (await isolation.begins()) continue;
    // A follow-up job asks for a claim at once, but only with room to claim
    // into; with every slot and the buffer full, wait for a slot.
    if (r.waiter.requested && want > 0) continue;
    // A claim that came up short emptied the runner's one queue: what comes
    // next is enqueued meanwhile, so it claims again at the stream's pace
    // (below), not at once. A full claim, or a runner of several queues
    // (the next claim takes the next queue), claims again at once.
    if (claimed > 0 && (claimed === want || r.options.queues.length > 1)) continue;
    if (claimed > 0) slots.pump();
    const streaming = clock.now() - foundAt < r.pollMs;
    // Jobs held back by a rate limit: claimed again as their window opens,
    // and worth staying for when it opens within the linger.
    const opensInMs = want > 0 && slots.busy < slots.size ? await producer.rateOpensInMs(r.maxLeaseMs()) : null;
    if (opensInMs !== null && opensInMs <= Math.max(linger.ms(), RATE_STAY_MS)) lastWorkAt = clock.now();
    const idle = slots.busy === 0 && producer.buffered === 0;
    if (idle && clock.now() - lastWorkAt >= linger.ms()) return "idle";
    if (!idle) lastWorkAt = clock.now();
    const untilIdleMs = linger.ms() - (clock.now() - lastWorkAt);
    // Room for work, none found for a poll, and staying (for the jobs it
    // runs, or at least a poll of its linger): listen for the next enqueue
    // (runner/bell.ts), then claim once more for one enqueued before the
    // bell listened.
    if (want > 0 && r.bell && (!idle || untilIdleMs >= r.pollMs) && (await r.bell.listen())) continue;
    await r.waiter.pause(clock, waitMs({ want, idle, untilIdleMs, pollMs: r.pollMs, opensInMs, streaming }), want <= 0);
  }
}

/**
 * How many to claim: once the buffer is down to half of what the slots (or
 * the prefetch) hold, enough to fill every slot plus the prefetch; nothing
 * while suspects wait to run alone.
 */
function wanted({ slots, producer, isolation, gauge, options }: RunnerParts): number {
  const ahead = options.prefetch ?? gauge.size();
  const buffered = producer.buffered;
  if (isolation.active || buffered > Math.max(slots.size, ahead) / 2) return 0;
  return slots.size + ahead - slots.busy - buffered;
}

/** One claim of `want`, of which rate-limited jobs only as many as there are free slots; timed for the prefetch gauge. */
async function claimMore({ producer, slots, tally, gauge, linger, waiter, maxLeaseMs, bell, clock }: RunnerParts, want: number): Promise<number> {
  waiter.requested = false;
  const idleBefore = slots.busy === 0 && producer.buffered === 0;
  const rateRoom = Math.max(0, slots.size - slots.busy - producer.buffered);
  // Until a claim has brought jobs, a claim may be the one that opened a connection of the
  // pool: a handshake, not a round trip to size the prefetch by.
  const noneYet = tally.summary.claimed === 0;
  const sent = clock.now();
  const claimed = (await producer.claim(want, maxLeaseMs(), false, rateRoom)).length;
  if (!noneYet) gauge.claimTook(clock.now() - sent);
  // An arrival: work found after an idle spell, or the first (runner/linger.ts).
  if (claimed > 0 && (idleBefore || noneYet)) linger.arrived();
  tally.claimed(claimed);
  // Work found: no ring needed until a claim finds none; a full claim: busy, the bell's connection goes back.
  if (claimed > 0 && bell) claimed === want && bell.listening ? void bell.quiet() : bell.found();
  return claimed;
}

/**
 * The wait before the next claim: with nothing to claim into (slots and
 * buffer full), until a slot frees, at least a second; a poll, or a fifth
 * of one while a stream arrives (a claim found work within the last poll);
 * idle, no longer than what is left of the linger (then it leaves); held
 * only by a rate limit window, until it opens.
 */
export function waitMs(a: { want: number; idle: boolean; untilIdleMs: number; pollMs: number; opensInMs: number | null; streaming?: boolean }): number {
  const { want, idle, untilIdleMs, pollMs, opensInMs } = a;
  const nextPollMs = a.streaming ? pollMs / STREAM_POLLS : pollMs;
  const baseWaitMs = want <= 0 && !idle ? Math.max(pollMs, 1_000) : idle ? Math.min(nextPollMs, Math.max(untilIdleMs, 0) + 1) : nextPollMs;
  if (opensInMs === null) return baseWaitMs;
  return Math.max(RATE_RECHECK_MIN_MS, idle ? opensInMs : Math.min(baseWaitMs, opensInMs));
}

/**
 * On every exit: give back what never started, let running jobs finish
 * (each is bounded by its lease), and write every outcome that can still be
 * written.
 */
export async function closeDown(r: RunnerParts): Promise<void> {
  r.slots.stop();
  for (const b of r.producer.takeAll()) giveBack(r, b);
  await r.bell?.quiet();
  await r.slots.ended();
  await r.completer.drain();
}
