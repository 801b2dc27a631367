import { retryDelayMs } from "../lifecycle/backoff.ts";
import { executeJob, type ExecuteArgs } from "./executor.ts";
import type { RunnerParts } from "./parts.ts";
import type { Buffered } from "./producer.ts";
import type { Held } from "./completer.ts";
import type { Success } from "../lifecycle/settle.ts";

/**
 * How long a handler runs before its start is recorded (for a job that owes
 * no attempt). A job that ends sooner needs no mark, its end says it ran, so
 * a quick job is one row version fewer and its settle a simpler statement;
 * a death within this window gives the attempt back, as a death does for a
 * start not yet written (docs/internals.md, "A death charges only handlers
 * that started"). A step's record takes the mark along at once.
 */
export const START_MARK_AFTER_MS = 50;

/**
 * One buffered job in one slot: made fit to start (a lease that sat in the
 * buffer too long is renewed, or the job given back), its start recorded
 * (before the handler for a job that owes an attempt, else once it has run
 * `START_MARK_AFTER_MS`), run by the executor, and its outcome handed to the
 * completer.
 */
export async function runBuffered(r: RunnerParts, b: Buffered, context: ExecuteArgs["context"]): Promise<void> {
  const { producer, completer, tally, clock, options } = r;
  const { job } = b;
  const type = options.registry.get(job.name);
  const deadline = type ? (producer.fresh(b) ?? (await producer.renew(b, r.maxLeaseMs()))) : null;
  if (deadline === null) return giveBack(r, b);
  // One object for the job's writes: its start mark, then its success (the usual end) with what it returned.
  const lease: Held<Success> = { id: job.id, leaseToken: job.leaseToken, deadline, result: undefined, steps: undefined };
  tally.hold(b);
  // Owed a mark until it is written, or the job ends (its outcome records that it ran).
  let owesMark = !job.startFirst;
  const markNow = () => {
    if (!owesMark) return;
    owesMark = false;
    completer.markStarted(lease);
  };
  if (job.startFirst && !(await completer.recordStart(lease))) return tally.forget(job.id);
  // Timed on the runner's clock, the one its leases and deadlines are on (an injected clock in tests).
  const startedAt = clock.now();
  const result = await executeJob({
    job, type: type!, deadline, clock, context,
    maxResultBytes: options.limits?.maxPayloadBytes, store: options.store,
    recordStep: (record) => (markNow(), completer.recordStep({ ...record, deadline })),
    // The executor's timer marks it once it has run START_MARK_AFTER_MS, unless it ended sooner.
    markAfterMs: START_MARK_AFTER_MS, onMark: owesMark ? markNow : undefined,
  });
  owesMark = false;
  r.gauge.jobTook(clock.now() - startedAt);
  tally.ran(job.id, result.outcome);
  if (result.outcome === "succeeded") {
    lease.result = result.result;
    lease.steps = result.steps;
    return completer.succeed(lease);
  }
  if (result.outcome === "slept") return completer.sleep({ id: job.id, leaseToken: job.leaseToken, deadline, runAt: result.runAt, steps: result.steps });
  completer.fail({
    id: job.id, leaseToken: job.leaseToken, deadline, outcome: result.outcome, error: result.error, permanent: result.permanent, steps: result.steps,
    retryDelayMs: retryDelayMs(job.attempts, job.backoffMs),
  });
}

/** A job that will not start here goes back to the queue, its attempt not charged. */
export function giveBack(r: RunnerParts, b: Buffered): void {
  r.tally.hold(b);
  r.completer.release({ ...b.job, deadline: b.deadline });
}
