/** The most jobs a runner claims ahead of its free slots. */
export const MAX_PREFETCH = 1_000;

/**
 * How many jobs a runner claims ahead of its free slots: what its slots could
 * finish during two claims' round trips, given how long its jobs take, and no
 * more. Quick jobs, or a slow link, get a deep buffer, so the claim round trip
 * stops being the limit; slow jobs get none, so a runner never sits on jobs
 * another runner could start. Nothing is claimed ahead until a job has been
 * timed.
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
    return Math.min(MAX_PREFETCH, Math.floor((2 * this.slots * this.claimMs) / this.jobMs));
  }
}
