import type { Store } from "../db/db.ts";
import { boundedStore, WriteDeadlineError, writeDeadlineMs } from "../db/deadline.ts";
import { DEFAULT_QUERY_TIMEOUT_MS } from "../db/drivers/options.ts";
import { settledEarlier, settleJobs, stepKey, type Failure, type Lease, type Sleep, type StepRecord, type Success } from "../lifecycle/settle.ts";
import { nextTurn, type Clock } from "./clock.ts";
import { backoffMs, isTransient } from "./transient.ts";

/** An outcome to write, with the local time its lease runs out. */
export type Held<T extends Lease = Lease> = T & { deadline: number };

export type SettleKind = "succeeded" | "failed" | "released" | "slept";

/** Told once per outcome, when it is written, refused by fencing, or abandoned. */
export interface SettleReport {
  lease: Lease;
  kind: SettleKind;
  /** Written (true), or refused because the lease was lost (false). */
  accepted: boolean;
  /** The job's status after an accepted failure. */
  status?: "queued" | "dead";
  /** Never written: the lease ran out while the database could not be reached. */
  abandoned?: boolean;
}

export interface CompleterOptions {
  store: Store;
  clock: Clock;
  onSettled: (report: SettleReport) => void;
  /** Told of each failed write before it is retried (or given up). */
  onWriteError?: (err: unknown, retrying: boolean) => void;
  /** Most outcomes in one statement. */
  maxBatch?: number;
  /** The longest one try of a write waits on one connection (the driver's query timeout); default 5 s. */
  queryTimeoutMs?: number;
  random?: () => number;
}

/**
 * The completer owns writing outcomes: start marks, step records,
 * successes, failures, releases and sleeps. What arrives while a write is in
 * flight goes out together in the next one, so a busy runner writes many
 * jobs per round trip (and per commit) and an idle one writes each at once;
 * a step record and its job's start mark or end in one batch go as one. A failed write is retried with backoff
 * for as long as its leases last; an outcome whose lease has run out is
 * abandoned (the rescuer records it). After a retry it first asks which
 * outcomes the lost write had already applied, so nothing is written twice.
 * Each try gives up on its connection after a deadline in proportion to the
 * time its earliest lease has left (`writeDeadlineMs`), and the retry takes
 * another connection at once.
 */
export class Completer {
  /** Ordinary outcomes, batched; and timeouts, which never queue behind an ordinary write (see `fail`). */
  private readonly lane = newLane();
  private readonly express = newLane();
  private readonly startWaiters = new Map<string, (marked: boolean) => void>();
  private readonly stepWaiters = new Map<string, (written: boolean) => void>();
  private readonly maxBatch: number;
  private readonly capMs: number;

  constructor(private readonly o: CompleterOptions) {
    this.maxBatch = o.maxBatch ?? 1_000;
    this.capMs = o.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS;
  }

  /** A handler started: recorded in the next write, without waiting for it. */
  markStarted(lease: Held): void {
    this.lane.started.push(lease);
    this.kick(this.lane);
  }

  /**
   * Records a start before the handler runs (for a job that owes an
   * attempt). Resolves true once written, false if the lease was lost.
   */
  recordStart(lease: Held): Promise<boolean> {
    return new Promise((resolve) => {
      this.startWaiters.set(lease.id, resolve);
      this.markStarted(lease);
    });
  }

  /**
   * Keeps a step's result, in the next write (with its job's start mark or
   * end when they go in the same one). Resolves true once written, false if
   * the lease was lost.
   */
  recordStep(record: Held<StepRecord>): Promise<boolean> {
    return new Promise((resolve) => {
      this.stepWaiters.set(stepKey(record), resolve);
      this.lane.steps.push(record);
      this.kick(this.lane);
    });
  }

  succeed(lease: Held<Success>): void {
    this.lane.succeeded.push(lease);
    this.kick(this.lane);
  }

  /**
   * A failure goes in the next ordinary write; a timeout (an overrun, aborted
   * a settle margin before its lease ends) goes out at once on a write of its
   * own, taking along its job's start mark and step records not yet sent, so
   * that it never waits for an ordinary batch in flight.
   */
  fail(failure: Held<Failure>): void {
    if (failure.outcome !== "timeout") {
      this.lane.failed.push(failure);
      return this.kick(this.lane);
    }
    const mine = (l: Held) => l.id === failure.id;
    this.express.started.push(...this.lane.started.filter(mine));
    this.express.steps.push(...this.lane.steps.filter(mine));
    this.lane.started = this.lane.started.filter((l) => !mine(l));
    this.lane.steps = this.lane.steps.filter((l) => !mine(l));
    this.express.failed.push(failure);
    this.kick(this.express);
  }

  release(lease: Held): void {
    this.lane.released.push(lease);
    this.kick(this.lane);
  }

  sleep(sleep: Held<Sleep>): void {
    this.lane.slept.push(sleep);
    this.kick(this.lane);
  }

  /** Outcomes handed in and not yet written. */
  backlog(): number {
    return ended(this.lane) + ended(this.express);
  }

  /** Whether the last write failed: the database is not answering. */
  unhealthy(): boolean {
    return this.lane.failures + this.express.failures > 0;
  }

  /** Resolves when everything handed in so far is written or abandoned. */
  async drain(): Promise<void> {
    while (this.lane.inflight || this.express.inflight) await Promise.all([this.lane.inflight, this.express.inflight]);
  }

  private kick(lane: Lane): void {
    if (lane.inflight) return;
    lane.inflight = this.flushAll(lane).finally(() => {
      lane.inflight = null;
    });
  }

  private async flushAll(lane: Lane): Promise<void> {
    // Let outcomes of the same tick join this batch.
    await nextTurn();
    while (lane.started.length + lane.steps.length + ended(lane) > 0) {
      await this.flushOnce(lane);
    }
  }

  private async flushOnce(lane: Lane): Promise<void> {
    this.abandonExpired(lane);
    const take = <T>(list: T[]) => list.splice(0, this.maxBatch);
    const batch = {
      succeeded: take(lane.succeeded),
      failed: take(lane.failed),
      released: take(lane.released),
      slept: take(lane.slept),
      started: [] as Held[],
      steps: take(lane.steps),
    };
    // An end never goes before its job's step record: one whose record did not fit this batch waits for the next.
    const later = new Set(lane.steps.map((r) => r.id));
    if (later.size > 0) {
      const hold = <T extends Held>(list: T[], queue: T[]) => {
        queue.unshift(...list.filter((l) => later.has(l.id)));
        return list.filter((l) => !later.has(l.id));
      };
      batch.succeeded = hold(batch.succeeded, lane.succeeded);
      batch.failed = hold(batch.failed, lane.failed);
      batch.slept = hold(batch.slept, lane.slept);
    }
    const ending = new Set([...batch.succeeded, ...batch.failed, ...batch.released, ...batch.slept].map((l) => l.id));
    // A job that ends in this batch needs no start mark: its attempt row says it ran.
    for (const l of take(lane.started)) {
      if (ending.has(l.id)) this.resolveStart(l.id, true);
      else batch.started.push(l);
    }
    const all: Held[] = [...batch.started, ...batch.steps, ...batch.succeeded, ...batch.failed, ...batch.released, ...batch.slept];
    if (all.length === 0) return;
    // The write races the earliest lease in it: on a connection gone silent it gives up in proportion to the time that lease has left.
    const store = boundedStore(this.o.store, writeDeadlineMs(Math.min(...all.map((l) => l.deadline)) - this.o.clock.now(), this.capMs), this.o.clock);
    try {
      if (lane.failures > 0) await this.dropSettledEarlier(store, batch);
      const written = await settleJobs(store, batch);
      lane.failures = 0;
      for (const l of batch.started) this.resolveStart(l.id, written.started.has(l.id));
      for (const r of batch.steps) this.resolveStep(stepKey(r), written.steps.has(stepKey(r)));
      for (const l of batch.succeeded) this.o.onSettled({ lease: l, kind: "succeeded", accepted: written.succeeded.has(l.id) });
      for (const f of batch.failed) {
        this.o.onSettled({ lease: f, kind: "failed", accepted: written.failed.has(f.id), status: written.failed.get(f.id) });
      }
      for (const l of batch.released) this.o.onSettled({ lease: l, kind: "released", accepted: written.released.has(l.id) });
      for (const l of batch.slept) this.o.onSettled({ lease: l, kind: "slept", accepted: written.slept.has(l.id) });
    } catch (err) {
      lane.failures++;
      const transient = isTransient(err);
      this.o.onWriteError?.(err, transient);
      // Put the batch back in front and wait before the next try; a
      // non-transient error is retried too (a statement cannot half-apply),
      // and leases bound how long.
      lane.started.unshift(...batch.started);
      lane.steps.unshift(...batch.steps);
      lane.succeeded.unshift(...batch.succeeded);
      lane.failed.unshift(...batch.failed);
      lane.released.unshift(...batch.released);
      lane.slept.unshift(...batch.slept);
      // A try that outlived its deadline lost only its connection: the next one, on another, goes at once.
      if (err instanceof WriteDeadlineError) return;
      const waitMs = backoffMs(lane.failures, 50, 1_000, this.o.random);
      await new Promise<void>((resolve) => this.o.clock.after(waitMs, resolve));
    }
  }

  /** After a lost write, outcomes it had already applied are reported, not written again. */
  private async dropSettledEarlier(
    store: Store,
    batch: { succeeded: Held<Success>[]; failed: Held<Failure>[]; released: Held[]; slept: Held<Sleep>[]; steps: Held<StepRecord>[] },
  ): Promise<void> {
    const done = await settledEarlier(store, [...batch.succeeded, ...batch.failed, ...batch.released, ...batch.slept]);
    if (done.size === 0) return;
    // A record that rode with an end already written was written with it.
    batch.steps = batch.steps.filter((r) => !done.has(r.id) || (this.resolveStep(stepKey(r), true), false));
    const keep = <T extends Held>(list: T[], kind: SettleKind) =>
      list.filter((l) => {
        const status = done.get(l.id);
        if (status === undefined) return true;
        this.o.onSettled({ lease: l, kind, accepted: true, status: kind === "failed" ? (status as "queued" | "dead") : undefined });
        return false;
      });
    batch.succeeded = keep(batch.succeeded, "succeeded");
    batch.failed = keep(batch.failed, "failed");
    batch.released = keep(batch.released, "released");
    batch.slept = keep(batch.slept, "slept");
  }

  private abandonExpired(lane: Lane): void {
    const now = this.o.clock.now();
    const live = <T extends Held>(list: T[], kind: SettleKind): T[] =>
      list.filter((l) => {
        if (l.deadline > now) return true;
        this.o.onSettled({ lease: l, kind, accepted: false, abandoned: true });
        return false;
      });
    lane.succeeded = live(lane.succeeded, "succeeded");
    lane.failed = live(lane.failed, "failed");
    lane.released = live(lane.released, "released");
    lane.slept = live(lane.slept, "slept");
    lane.started = lane.started.filter((l) => {
      if (l.deadline > now) return true;
      this.resolveStart(l.id, false);
      return false;
    });
    lane.steps = lane.steps.filter((r) => {
      if (r.deadline > now) return true;
      this.resolveStep(stepKey(r), false);
      return false;
    });
  }

  private resolveStep(key: string, written: boolean): void {
    const waiter = this.stepWaiters.get(key);
    if (!waiter) return;
    this.stepWaiters.delete(key);
    waiter(written);
  }

  private resolveStart(id: string, marked: boolean): void {
    const waiter = this.startWaiters.get(id);
    if (!waiter) return;
    this.startWaiters.delete(id);
    waiter(marked);
  }
}


/** The outcomes waiting in one line of writes, and its write in flight. */
interface Lane {
  started: Held[];
  succeeded: Held<Success>[];
  failed: Held<Failure>[];
  released: Held[];
  slept: Held<Sleep>[];
  steps: Held<StepRecord>[];
  inflight: Promise<void> | null;
  /** Failed tries in a row. */
  failures: number;
}

const newLane = (): Lane => ({ started: [], succeeded: [], failed: [], released: [], slept: [], steps: [], inflight: null, failures: 0 });
const ended = (lane: Lane) => lane.succeeded.length + lane.failed.length + lane.released.length + lane.slept.length;
