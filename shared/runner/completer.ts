import type { Store } from "../db/db.ts";
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
 */
export class Completer {
  private started: Held[] = [];
  private succeeded: Held<Success>[] = [];
  private failed: Held<Failure>[] = [];
  private released: Held[] = [];
  private slept: Held<Sleep>[] = [];
  private steps: Held<StepRecord>[] = [];
  private readonly startWaiters = new Map<string, (marked: boolean) => void>();
  private readonly stepWaiters = new Map<string, (written: boolean) => void>();
  private inflight: Promise<void> | null = null;
  private failures = 0;
  private readonly maxBatch: number;

  constructor(private readonly o: CompleterOptions) {
    this.maxBatch = o.maxBatch ?? 1_000;
  }

  /** A handler started: recorded in the next write, without waiting for it. */
  markStarted(lease: Held): void {
    this.started.push(lease);
    this.kick();
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
      this.steps.push(record);
      this.kick();
    });
  }

  succeed(lease: Held<Success>): void {
    this.succeeded.push(lease);
    this.kick();
  }

  fail(failure: Held<Failure>): void {
    this.failed.push(failure);
    this.kick();
  }

  release(lease: Held): void {
    this.released.push(lease);
    this.kick();
  }

  sleep(sleep: Held<Sleep>): void {
    this.slept.push(sleep);
    this.kick();
  }

  /** Outcomes handed in and not yet written. */
  backlog(): number {
    return this.succeeded.length + this.failed.length + this.released.length + this.slept.length;
  }

  /** Whether the last write failed: the database is not answering. */
  unhealthy(): boolean {
    return this.failures > 0;
  }

  /** Resolves when everything handed in so far is written or abandoned. */
  async drain(): Promise<void> {
    while (this.inflight) await this.inflight;
  }

  private kick(): void {
    if (this.inflight) return;
    this.inflight = this.flushAll().finally(() => {
      this.inflight = null;
    });
  }

  private async flushAll(): Promise<void> {
    // Let outcomes of the same tick join this batch.
    await nextTurn();
    while (this.started.length + this.steps.length + this.backlog() > 0) {
      await this.flushOnce();
    }
  }

  private async flushOnce(): Promise<void> {
    this.abandonExpired();
    const take = <T>(list: T[]) => list.splice(0, this.maxBatch);
    const batch = {
      succeeded: take(this.succeeded),
      failed: take(this.failed),
      released: take(this.released),
      slept: take(this.slept),
      started: [] as Held[],
      steps: take(this.steps),
    };
    // An end never goes before its job's step record: one whose record did not fit this batch waits for the next.
    const later = new Set(this.steps.map((r) => r.id));
    if (later.size > 0) {
      const hold = <T extends Held>(list: T[], queue: T[]) => {
        queue.unshift(...list.filter((l) => later.has(l.id)));
        return list.filter((l) => !later.has(l.id));
      };
      batch.succeeded = hold(batch.succeeded, this.succeeded);
      batch.failed = hold(batch.failed, this.failed);
      batch.slept = hold(batch.slept, this.slept);
    }
    const ending = new Set([...batch.succeeded, ...batch.failed, ...batch.released, ...batch.slept].map((l) => l.id));
    // A job that ends in this batch needs no start mark: its attempt row says it ran.
    for (const l of take(this.started)) {
      if (ending.has(l.id)) this.resolveStart(l.id, true);
      else batch.started.push(l);
    }
    if (batch.started.length + batch.steps.length + batch.succeeded.length + batch.failed.length + batch.released.length + batch.slept.length === 0) return;
    try {
      if (this.failures > 0) await this.dropSettledEarlier(batch);
      const written = await settleJobs(this.o.store, batch);
      this.failures = 0;
      for (const l of batch.started) this.resolveStart(l.id, written.started.has(l.id));
      for (const r of batch.steps) this.resolveStep(stepKey(r), written.steps.has(stepKey(r)));
      for (const l of batch.succeeded) this.o.onSettled({ lease: l, kind: "succeeded", accepted: written.succeeded.has(l.id) });
      for (const f of batch.failed) {
        this.o.onSettled({ lease: f, kind: "failed", accepted: written.failed.has(f.id), status: written.failed.get(f.id) });
      }
      for (const l of batch.released) this.o.onSettled({ lease: l, kind: "released", accepted: written.released.has(l.id) });
      for (const l of batch.slept) this.o.onSettled({ lease: l, kind: "slept", accepted: written.slept.has(l.id) });
    } catch (err) {
      this.failures++;
      const transient = isTransient(err);
      this.o.onWriteError?.(err, transient);
      // Put the batch back in front and wait before the next try; a
      // non-transient error is retried too (a statement cannot half-apply),
      // and leases bound how long.
      this.started.unshift(...batch.started);
      this.steps.unshift(...batch.steps);
      this.succeeded.unshift(...batch.succeeded);
      this.failed.unshift(...batch.failed);
      this.released.unshift(...batch.released);
      this.slept.unshift(...batch.slept);
      const waitMs = backoffMs(this.failures, 50, 1_000, this.o.random);
      await new Promise<void>((resolve) => this.o.clock.after(waitMs, resolve));
    }
  }

  /** After a lost write, outcomes it had already applied are reported, not written again. */
  private async dropSettledEarlier(
    batch: { succeeded: Held<Success>[]; failed: Held<Failure>[]; released: Held[]; slept: Held<Sleep>[]; steps: Held<StepRecord>[] },
  ): Promise<void> {
    const done = await settledEarlier(this.o.store, [...batch.succeeded, ...batch.failed, ...batch.released, ...batch.slept]);
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

  private abandonExpired(): void {
    const now = this.o.clock.now();
    const live = <T extends Held>(list: T[], kind: SettleKind): T[] =>
      list.filter((l) => {
        if (l.deadline > now) return true;
        this.o.onSettled({ lease: l, kind, accepted: false, abandoned: true });
        return false;
      });
    this.succeeded = live(this.succeeded, "succeeded");
    this.failed = live(this.failed, "failed");
    this.released = live(this.released, "released");
    this.slept = live(this.slept, "slept");
    this.started = this.started.filter((l) => {
      if (l.deadline > now) return true;
      this.resolveStart(l.id, false);
      return false;
    });
    this.steps = this.steps.filter((r) => {
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

