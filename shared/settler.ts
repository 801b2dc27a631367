import { completeJobs, failJobs, releaseJobs, type Failure, type Lease } from "./settle.ts";
import type { Store } from "./db.ts";

export type SettleOutcome = "succeeded" | "failed" | "timeout" | "released";

/** Told once per lease, when its settle is written or refused. */
export type OnSettled = (lease: Lease, outcome: SettleOutcome, accepted: boolean, status?: "queued" | "dead") => void;

/**
 * Batches settles: outcomes that arrive while a write is in flight go out
 * together in the next one, so a busy runner writes many jobs per round trip
 * and an idle one writes each at once. One write of each kind in flight.
 */
export class Settler {
  private readonly pending = { succeeded: [] as Lease[], failed: [] as Failure[], released: [] as Lease[] };
  private readonly inflight = { succeeded: null, failed: null, released: null } as Record<
    "succeeded" | "failed" | "released",
    Promise<void> | null
  >;

  constructor(
    private readonly store: Store,
    private readonly onSettled: OnSettled,
    private readonly onError: (err: unknown) => void,
  ) {}

  succeed(lease: Lease): void {
    this.pending.succeeded.push(lease);
    this.kick("succeeded");
  }

  fail(failure: Failure): void {
    this.pending.failed.push(failure);
    this.kick("failed");
  }

  release(lease: Lease): void {
    this.pending.released.push(lease);
    this.kick("released");
  }

  /** Resolves when everything handed in so far is written. */
  async drain(): Promise<void> {
    while (this.inflight.succeeded || this.inflight.failed || this.inflight.released) {
      await Promise.all([this.inflight.succeeded, this.inflight.failed, this.inflight.released]);
    }
  }

  private kick(kind: "succeeded" | "failed" | "released"): void {
    if (this.inflight[kind]) return;
    this.inflight[kind] = this.flush(kind).finally(() => {
      this.inflight[kind] = null;
      if (this.pending[kind].length > 0) this.kick(kind);
    });
  }

  private async flush(kind: "succeeded" | "failed" | "released"): Promise<void> {
    // Let outcomes of the same tick join this batch.
    await new Promise((resolve) => setImmediate(resolve));
    try {
      if (kind === "failed") {
        const batch = this.pending.failed.splice(0);
        const written = await failJobs(this.store, batch);
        for (const f of batch) this.onSettled(f, f.outcome, written.has(f.id), written.get(f.id));
      } else {
        const batch = this.pending[kind].splice(0);
        const write = kind === "succeeded" ? completeJobs : releaseJobs;
        const written = await write(this.store, batch);
        for (const l of batch) this.onSettled(l, kind, written.has(l.id));
      }
    } catch (err) {
      // The leases stay as they are; the rescuer records these attempts.
      this.onError(err);
    }
  }
}
