import { claimBatch, rateOpensInMs, suspectWaiting, type ClaimedJob } from "../lifecycle/claim.ts";
import type { Store } from "../db/db.ts";
import { boundedStore, writeDeadlineMs } from "../db/deadline.ts";
import { DEFAULT_QUERY_TIMEOUT_MS } from "../db/drivers/options.ts";
import { extendLease } from "../lifecycle/settle.ts";
import type { Clock } from "./clock.ts";
import { MAX_SETTLE_MARGIN_MS } from "./executor.ts";
import { retrying } from "./transient.ts";
import type { SettleOutcome } from "./options.ts";

/** A claimed job waiting for a slot, with the local time its lease runs out. */
export interface Buffered {
  job: ClaimedJob;
  deadline: number;
  /** When it started here (the tally's clock), once held. */
  at?: number;
  /** What its handler came to, once it ran (a failure is `failed` or `timeout`). */
  outcome?: SettleOutcome;
}

/** How long a runner keeps retrying a database that does not answer before it gives up. */
export const MAX_OUTAGE_MS = 60_000;
/** How often a runner looks for suspects waiting to run alone. */
export const SUSPECT_CHECK_MS = 1_000;

export interface ProducerOptions {
  store: Store;
  clock: Clock;
  queues: readonly string[];
  /** Job types this runner knows: it claims no other. */
  names: readonly string[];
  /** False: claim in priority order, ignoring groups (see `ClaimArgs.fair`). */
  fair?: boolean;
  /** Whether any of `names` declares a concurrency limit (see `ClaimArgs.limited`). */
  limited?: boolean;
  /** Whether any of `names` declares a rate limit (see `ClaimArgs.rated`). */
  rated?: boolean;
  runnerId: string;
  /** The latest local time a retried query may still start. */
  until: () => number;
  onRetry?: (err: unknown, tryNumber: number, waitMs: number) => void;
}

/**
 * The producer owns fetching: it claims jobs into its buffer (queues in
 * turn, with transient errors retried while time remains), hands them to
 * free slots, renews a lease that sat in the buffer too long or gives it up,
 * and finds suspects to run alone. It decides nothing about how many: the
 * loop asks for what its slots and prefetch can take.
 */
export class Producer {
  private readonly buffer: Buffered[] = [];
  private turn = 0;
  private suspectCheckAt = 0;
  /** What the last claim that brought jobs said of suspects, not yet acted on. */
  private suspectsSeen = false;
  /** The last claim found fewer jobs than it asked for. */
  drained = false;

  constructor(private readonly o: ProducerOptions) {}

  /**
   * Claims up to `want` jobs whose lease fits `maxLeaseMs`, trying each queue
   * in turn until one has work; of them at most `rateRoom` rate-limited ones
   * (a rate-limited job's claim is its start), buffered ahead of the rest so
   * they start at once.
   */
  async claim(want: number, maxLeaseMs: number, suspects = false, rateRoom = want): Promise<ClaimedJob[]> {
    for (let tried = 0; tried < this.o.queues.length; tried++) {
      const queue = this.o.queues[this.turn++ % this.o.queues.length]!;
      const sentAt = this.o.clock.now();
      const { jobs, suspectsWaiting } = await this.retry(() =>
        claimBatch(this.o.store, {
          queue, runnerId: this.o.runnerId, limit: want, maxLeaseMs, suspects, names: this.o.names, fair: this.o.fair,
          limited: this.o.limited, rated: this.o.rated, rateRoom,
        }),
      );
      if (!suspects) this.drained = jobs.length < want;
      // A claim that brings jobs says whether suspects wait in its queue: for
      // a runner of one queue that is the whole answer, and the next look is
      // not due until SUSPECT_CHECK_MS from now.
      if (!suspects && suspectsWaiting !== undefined && this.o.queues.length === 1) {
        this.suspectsSeen = suspectsWaiting;
        this.suspectCheckAt = this.o.clock.now() + SUSPECT_CHECK_MS;
      }
      for (const job of jobs) if (job.rated) this.buffer.push(buffered(job, sentAt));
      for (const job of jobs) if (!job.rated) this.buffer.push(buffered(job, sentAt));
      if (jobs.length > 0) return jobs;
    }
    return [];
  }

  /** Jobs claimed and waiting for a slot. */
  get buffered(): number {
    return this.buffer.length;
  }

  /** The next buffered job to start, if any. */
  next(): Buffered | undefined {
    return this.buffer.shift();
  }

  /**
   * A job this runner already holds (a follow-up inserted claimed by it,
   * runner/follow.ts): it starts before anything claimed earlier.
   */
  handOff(item: Buffered): void {
    this.buffer.unshift(item);
  }

  /** Empties the buffer, returning what never started (to be given back). */
  takeAll(): Buffered[] {
    return this.buffer.splice(0);
  }

  /**
   * Whether a suspect waits to run alone: what the last claim said, else
   * asked at most every `SUSPECT_CHECK_MS` unless `now`.
   */
  async suspectWaiting(maxLeaseMs: number, now = false): Promise<boolean> {
    if (this.suspectsSeen) {
      this.suspectsSeen = false;
      return true;
    }
    if (!now && this.o.clock.now() < this.suspectCheckAt) return false;
    this.suspectCheckAt = this.o.clock.now() + SUSPECT_CHECK_MS;
    return this.retry(() => suspectWaiting(this.o.store, this.o.queues, maxLeaseMs, this.o.names));
  }

  /**
   * How long until a rate limit window opens for a job this runner could
   * claim (null: none waits on one); only a runner of rate-limited types asks.
   */
  async rateOpensInMs(maxLeaseMs: number): Promise<number | null> {
    if (!this.o.rated) return null;
    return this.retry(() => rateOpensInMs(this.o.store, this.o.queues, maxLeaseMs, this.o.names));
  }

  /**
   * A buffered job's deadline if it can start as it is: a handler is owed its
   * whole lease, so a job that waited in the buffer longer than a quarter of
   * it (at most `MAX_SETTLE_MARGIN_MS`) cannot (undefined: `renew` it first).
   * Not the settle margin: that is at least 400 ms, which would let a job of a
   * 1 s lease start with 200 ms to run.
   */
  fresh(item: Buffered): number | undefined {
    const { job } = item;
    return item.deadline - this.o.clock.now() >= job.leaseMs - maxBufferedMs(job.leaseMs) ? item.deadline : undefined;
  }

  /**
   * Renews a stale buffered job's lease to a full one, if `maxLeaseMs` can
   * still cover it. Returns its new deadline, or null when it must be given
   * back instead.
   */
  async renew(item: Buffered, maxLeaseMs: number): Promise<number | null> {
    const { job } = item;
    if (job.leaseMs > maxLeaseMs) return null;
    const sentAt = this.o.clock.now();
    // The renewal races the lease it renews: on a connection gone silent it gives up in time to give the job back.
    const store = boundedStore(this.o.store, writeDeadlineMs(item.deadline - sentAt, DEFAULT_QUERY_TIMEOUT_MS), this.o.clock);
    const renewed = await extendLease(store, job, job.leaseMs).catch(() => null);
    return renewed ? sentAt + job.leaseMs : null;
  }

  private retry<T>(fn: () => Promise<T>): Promise<T> {
    const started = this.o.clock.now();
    return retrying(fn, {
      clock: this.o.clock,
      until: () => Math.min(this.o.until(), started + MAX_OUTAGE_MS),
      onRetry: this.o.onRetry,
    });
  }
}

/** How long a buffered job may wait for a slot and still start on its claim's lease: a quarter of it, at most 2 s. */
export const maxBufferedMs = (leaseMs: number) => Math.min(MAX_SETTLE_MARGIN_MS, Math.floor(leaseMs / 4));

/** A job claimed (or inserted claimed) at `sentAt`, as the buffer holds it: every field present from the start, one shape for all. */
export const buffered = (job: ClaimedJob, sentAt: number): Buffered => ({ job, deadline: sentAt + job.leaseMs, at: 0, outcome: undefined });
