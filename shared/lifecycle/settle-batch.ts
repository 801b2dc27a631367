/** What a settle is given and what it answers: the outcomes of a batch of attempts, by kind (shared/lifecycle/settle.ts). */

export interface Lease {
  id: string;
  leaseToken: string;
}

/** A success: the handler's return value as JSON (null when it returned nothing), and its attempt's steps. */
export interface Success extends Lease {
  result?: string | null;
  /** The attempt's steps as JSON (`StepLogEntry[]`), or null when it used none. */
  steps?: string | null;
}

/** A sleep: the job goes back to `queued` until `runAt`, its attempt given back. */
export interface Sleep extends Lease {
  runAt: Date;
  steps?: string | null;
}

export interface Failure extends Lease {
  outcome: "failed" | "timeout";
  error: string;
  /** Delay before the retry, if the job has attempts left. */
  retryDelayMs: number;
  /** End the job `dead` now, whatever attempts it has left. */
  permanent?: boolean;
  steps?: string | null;
}

/**
 * A completed step's result to keep (`job_steps`), fenced by the lease it
 * ran under: `result` is its JSON (null when the step returned nothing).
 */
export interface StepRecord extends Lease {
  seq: number;
  name: string;
  result: string | null;
  durationMs: number;
}

/** How a written step record is known in `SettleResult.steps`. */
export const stepKey = (r: { id: string; seq: number }) => `${r.id}/${r.seq}`;

/** One round trip's worth of outcomes, each kind in its own list. */
export interface SettleBatch {
  /** Handlers that have started: a death now charges their attempt. */
  started?: readonly Lease[];
  succeeded?: readonly Success[];
  failed?: readonly Failure[];
  /** Claimed but never started: back to `queued`, the attempt given back. */
  released?: readonly Lease[];
  /** Handlers that chose to sleep: back to `queued` until their time, the attempt given back. */
  slept?: readonly Sleep[];
  /**
   * Step results to keep. A record rides with its job's start mark or end
   * in the same batch (written only if that is); a job with neither is
   * locked (FOR SHARE) while its record is written. Never with a release.
   */
  steps?: readonly StepRecord[];
}

/** What a settle wrote: the ids it applied, and each failed job's new status. */
export interface SettleResult {
  started: Set<string>;
  succeeded: Set<string>;
  failed: Map<string, "queued" | "dead">;
  released: Set<string>;
  slept: Set<string>;
  /** The step records written, by `stepKey`. */
  steps: Set<string>;
}
