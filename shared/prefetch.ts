/** The most jobs a runner claims ahead of its free slots. */
export const MAX_PREFETCH = 500;

/**
 * How many jobs a runner claims ahead of its free slots: enough to keep every
 * slot busy until the next claim returns — twice the jobs it finishes per
 * millisecond times a claim's round trip — and no more. Quick jobs over a slow
 * link get a deep buffer, so the claim round trip stops being the limit; slow
 * jobs get none, so a runner never sits on jobs another runner could start.
 */
export class PrefetchGauge {
  private jobsPerMs = 0;
  private claimMs = 0;
  private finished = 0;
  private since: number;

  constructor(now = performance.now()) {
    this.since = now;
  }

  /** A job ended (any outcome). */
  jobFinished(): void {
    this.finished++;
  }

  /** A claim took `ms` from send to rows. */
  claimTook(ms: number): void {
    this.claimMs = this.claimMs === 0 ? ms : 0.7 * this.claimMs + 0.3 * ms;
  }

  /** Jobs to claim ahead, as of `now`. */
  size(now = performance.now()): number {
    const elapsed = now - this.since;
    if (elapsed >= 5) {
      this.jobsPerMs = 0.5 * this.jobsPerMs + 0.5 * (this.finished / elapsed);
      this.finished = 0;
      this.since = now;
    }
    return Math.min(MAX_PREFETCH, Math.floor(2 * this.jobsPerMs * this.claimMs));
  }
}
