/** The most jobs a runner claims ahead of its free slots. */
export const MAX_PREFETCH = 1_000;
/**
 * However quick the claim, a runner may hold what its slots finish in this
 * long: jobs of a few milliseconds are claimed tens at a time, not one or two
 * as slots free, and no job waits in a buffer longer than this for a slot.
 */
export const PREFETCH_HOLD_MS = 50;

/**
 * How many jobs a runner claims ahead of its free slots: what its slots could
 * finish during two claims' round trips or in `PREFETCH_HOLD_MS`, whichever
 * is more, given how long its jobs take. Quick jobs, or a slow link, get a
 * deep buffer, so the claim round trip stops being the limit; slow jobs get
 * none, so a runner never sits on jobs another runner could start. Nothing is
 * claimed ahead until a job has been timed.
 */
export class PrefetchGauge {
  private jobMs = Number.POSITIVE_INFINITY;
  private claimMs = 0;

  constructor(private readonly slots: number) {}

  /** A job's handler ran for `ms`. */
  jobTook(ms: number): void {
    const took = Math.max(ms, 0.01);
    this.jobMs = this.jobMs === Number.POSITIVE_INFINITY ? took : 0.8 * this.jobMs + 0.2 * took;
  }

  /** A claim took `ms` from send to rows. */
  claimTook(ms: number): void {
    this.claimMs = this.claimMs === 0 ? ms : 0.7 * this.claimMs + 0.3 * ms;
  }

  /** Jobs to claim ahead. */
  size(): number {
    const aheadMs = Math.max(2 * this.claimMs, PREFETCH_HOLD_MS);
    return Math.min(MAX_PREFETCH, Math.floor((this.slots * aheadMs) / this.jobMs));
  }
}
