import { Bell } from "./bell.ts";
import { PrefetchGauge } from "./prefetch.ts";
import { systemClock } from "./clock.ts";
import { Completer } from "./completer.ts";
import { follower } from "./follow.ts";
import { Isolation } from "./isolation.ts";
import { Linger } from "./linger.ts";
import { claimLoop, closeDown } from "./loop.ts";
import { workerPacing, type WorkerLog, type WorkerOptions, type WorkerSummary } from "./options.ts";
import { Waiter, type RunnerParts } from "./parts.ts";
import { Producer } from "./producer.ts";
import { runBuffered } from "./run-job.ts";
import { Slots } from "./slots.ts";
import { Tally } from "./tally.ts";

export type { SettledEvent, SettleOutcome, WorkerLog, WorkerOptions, WorkerSummary } from "./options.ts";
export { RATE_STAY_MS } from "./loop.ts";

const silent: WorkerLog = { info() {}, warn() {}, error() {} };

/**
 * The runner, with no Lambda in it: the producer claims into a buffer, the
 * slots start buffered jobs, the executor runs each under its deadline, the
 * completer writes outcomes in batches, the tally counts them; isolation runs
 * suspects alone, follow hands follow-up jobs off, and the loop claims and
 * waits until the queue is drained, time is up, or the database has been gone
 * too long. On every exit it gives back what never started, waits for its
 * handlers, and writes every outcome it can. The Lambda runner and the
 * benchmarks both run exactly this (docs/internals.md, "The runner loop").
 */
export async function runWorker(options: WorkerOptions): Promise<WorkerSummary> {
  const { store, registry, queues, runnerId } = options;
  const clock = options.clock ?? systemClock;
  const log = options.log ?? silent;
  const remainingMs = options.remainingMs ?? (() => Number.POSITIVE_INFINITY);
  const marginMs = options.marginMs ?? 0;
  const maxLeaseMs = () => Math.min(remainingMs() - marginMs, options.maxLeaseMs ?? Number.POSITIVE_INFINITY);
  // The config's defaults (shared/settings/config.ts) where the options say nothing, as a deployed runner gets them.
  const { idleMs, pollMs, linger, fair } = workerPacing(options);
  // A `Linger` given in remembers the arrivals earlier runs saw (a warm Lambda environment's).
  const adaptive = linger instanceof Linger ? linger : new Linger(clock, { minMs: pollMs, maxMs: idleMs });
  const types = [...registry.values()];
  const r = { options, clock, log, pollMs, maxLeaseMs, gauge: new PrefetchGauge(options.slots), waiter: new Waiter() } as RunnerParts;
  r.linger = { ms: () => (linger === "fixed" ? idleMs : adaptive.ms()), arrived: () => adaptive.arrived() };
  r.tally = new Tally({ clock, runnerId, log, onSettled: options.onSettled, onDead: options.onDead });
  r.completer = new Completer({
    store, clock,
    // Slots held back while outcomes piled up may start again.
    onSettled: (report) => (r.tally.settled(report), r.slots.pump()),
    onWriteError: (err, transient) => log.warn("settle write failed; retrying while the leases last", { error: String(err), transient }),
  });
  r.producer = new Producer({
    store, clock, queues, runnerId, names: [...registry.keys()], fair,
    limited: types.some((type) => type.concurrency !== undefined), rated: types.some((type) => type.rateLimit !== undefined),
    until: () => clock.now() + remainingMs() - marginMs,
    onRetry: (err, tryNumber, waitMs) => log.warn("database error; retrying", { error: String(err), tryNumber, waitMs }),
  });
  const context = { runnerId, enqueue: follower(r) };
  r.slots = new Slots({
    size: options.slots, producer: r.producer, completer: r.completer, maxLeaseMs, run: (b) => runBuffered(r, b, context),
    onError: (b, err) => (log.error("runner slot failed; the lease will be rescued", { jobId: b.job.id, error: String(err) }), r.tally.forget(b.job.id)),
    onFreed: () => r.waiter.slotFreed(),
  });
  r.bell = options.bell ? new Bell({ store, clock, queues, runnerId, log, quietMs: pollMs, onRing: () => r.waiter.request() }) : null;
  r.isolation = new Isolation({ producer: r.producer, completer: r.completer, slots: r.slots, tally: r.tally, maxLeaseMs });
  try {
    r.tally.summary.exit = await claimLoop(r);
  } catch (err) {
    // The database was gone for longer than the runner could wait, or refused a claim outright: stop cleanly, never crash.
    r.tally.summary.exit = "database";
    log.error("runner stopping: the database could not be reached", { error: String(err) });
  }
  await closeDown(r);
  return r.tally.finish();
}
