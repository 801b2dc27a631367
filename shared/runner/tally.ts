import type { Buffered } from "./producer.ts";
import type { Clock } from "./clock.ts";
import type { SettleReport } from "./completer.ts";
import type { SettledEvent, SettleOutcome, WorkerLog, WorkerSummary } from "./options.ts";


export interface TallyOptions {
  clock: Clock;
  runnerId: string;
  log: WorkerLog;
  onSettled?: (event: SettledEvent) => void;
  onDead?: (ids: string[]) => void;
}

/**
 * The tally owns what a runner says about its jobs: the summary it returns
 * (claimed, each outcome, stale settles, jobs it left in the queue), the log
 * line of each outcome that is not a quiet success, and the `onSettled` and
 * `onDead` calls. It remembers each job from its start (or give-back) to its
 * written outcome, for the attempt, run and duration those report.
 */
export class Tally {
  readonly summary: WorkerSummary = {
    claimed: 0, succeeded: 0, failed: 0, timedOut: 0, released: 0, slept: 0, stale: 0, leftQueued: 0, exit: "idle",
  };
  /** Each job held, with the time it started (`at`) and what its handler came to (`outcome`), written on its buffered entry. */
  private readonly held = new Map<string, Buffered>();
  /** Jobs whose last outcome here put them back in the queue (a retry, a release, a sleep). */
  private readonly leftQueued = new Set<string>();

  constructor(private readonly o: TallyOptions) {}

  claimed(n: number): void {
    this.summary.claimed += n;
  }

  /** A job is starting (or being given back): its outcome is reported from now. */
  hold(b: Buffered): void {
    b.at = this.o.clock.now();
    this.held.set(b.job.id, b);
  }

  /** A job that ends with no outcome to write (its start mark was refused, or its slot failed). */
  forget(id: string): void {
    this.held.delete(id);
  }

  /** What the handler came to: a failure is reported as `failed` or `timeout` by this. */
  ran(id: string, outcome: SettleOutcome): void {
    const b = this.held.get(id);
    if (b) b.outcome = outcome;
  }

  /** An outcome was written, refused by fencing, or abandoned (the completer's report). */
  settled({ lease: { id }, kind, accepted, status, abandoned }: SettleReport): void {
    const { summary, o } = this;
    const b = this.held.get(id);
    this.held.delete(id);
    const info = b?.job;
    const outcome = kind === "failed" ? (b?.outcome ?? "failed") : kind;
    const durationMs = b ? o.clock.now() - (b.at ?? 0) : 0;
    // Built only for a line that is logged: most outcomes are quiet successes.
    const fields = () => ({ jobId: id, attempt: info?.attempts, run: info?.run, runnerId: o.runnerId, outcome, durationMs, name: info?.name });
    if (!accepted) {
      summary.stale++;
      o.log.warn(abandoned ? "settle abandoned: lease ran out while the database was unreachable" : "stale settle refused: lease lost", fields());
    } else if (outcome === "succeeded") summary.succeeded++;
    else if (outcome === "failed") summary.failed++;
    else if (outcome === "timeout") summary.timedOut++;
    else if (outcome === "slept") summary.slept++;
    else summary.released++;
    if (accepted && outcome !== "succeeded" && outcome !== "released" && outcome !== "slept") o.log.info(`job ${outcome}`, { ...fields(), status });
    if (accepted && (outcome === "released" || outcome === "slept" || status === "queued")) this.leftQueued.add(id);
    else if (accepted) this.leftQueued.delete(id);
    if (accepted && status === "dead") o.onDead?.([id]);
    o.onSettled?.({
      jobId: id, queue: info?.queue ?? "", name: info?.name ?? "", attempt: info?.attempts ?? 0, run: info?.run ?? 0,
      outcome, accepted, status, durationMs,
    });
  }

  /** The summary, once every outcome is in. */
  finish(): WorkerSummary {
    this.summary.leftQueued = this.leftQueued.size;
    return this.summary;
  }
}
