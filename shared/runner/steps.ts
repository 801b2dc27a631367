import type { ClaimedJob } from "../lifecycle/claim.ts";
import { sql, type Store } from "../db/db.ts";
import { DEFAULT_MAX_PAYLOAD_BYTES, payloadJson } from "../jobs/payload.ts";
import { settleJobs, stepKey, type StepRecord } from "../lifecycle/settle.ts";
import type { Clock } from "./clock.ts";

/**
 * Durable steps of one attempt (`ctx.step`, `ctx.sleep`). A step runs its
 * function and records its JSON result in `job_steps`, fenced by the lease
 * token, before the handler goes on; a later attempt of the same job and
 * generation (a retry, a rescue after a death, a wake after a sleep) gets the
 * recorded result back instead of running it again (invariant 14). Steps are
 * numbered in the order the handler reaches them, and each number keeps its
 * name: a name used twice in one run, or a replay that reaches a recorded
 * number under another name, fails the attempt (the code changed under the
 * job). A step is at least once: one whose runner died before its record
 * was written runs again; its recorded result is exactly once.
 *
 * Where the records go (`RecordStep`): written by the runner's completer in
 * order with its settles, a record is awaited only before the next step's
 * function runs (or the next sleep), so it shares its round trip with the
 * runner's other writes, and the last one rides with the attempt's end (a
 * success, failure, sleep or yield: written if and only if that is). Without
 * one, each record is written on its own and awaited before the step returns.
 */

/** Writes one step's record, fenced by its lease; resolves whether it was written. */
export type RecordStep = (record: StepRecord) => Promise<boolean>;

/** One record on its own round trip: for a caller that settles by itself, outside the completer's order. */
export const recordStepAlone = (store: Store): RecordStep => async (record) =>
  (await settleJobs(store, { steps: [record] })).steps.has(stepKey(record));

/** One step as an attempt reached it: replayed from the record, or run (and how long it took). */
export interface StepLogEntry {
  name: string;
  replayed: boolean;
  ms: number;
}

/** The step names of a run disagree with the record, or repeat. */
export class StepOrderError extends Error {
  override name = "StepOrderError";
}

/** A step's result could not be recorded: the lease was lost; the attempt ends and its settle is refused. */
export class LeaseLostError extends Error {
  override name = "LeaseLostError";
}

/** Longest step name, in characters. */
export const MAX_STEP_NAME = 200;

const LOAD_STEPS = `
select s.seq, s.name, s.result, s.result is null as nothing from leasehold.job_steps s
join leasehold.jobs j on j.id = s.job_id and j.generation = s.generation
where j.id = $1::bigint and j.lease_token = $2::uuid
order by s.seq`;

type Recorded = { name: string; result: unknown };

export class StepRun {
  private recorded: Promise<Map<number, Recorded>> | null = null;
  private seq = 0;
  private sleeps = 0;
  private readonly names = new Set<string>();
  /** The longest step this attempt ran, in ms: the measure of whether the next one fits. */
  private longestMs = 0;
  readonly log: StepLogEntry[] = [];
  /** The step whose function threw, or was running when the attempt ended. */
  inFlight: string | null = null;
  failedStep: string | null = null;
  /** A step-order error: the attempt fails whatever the handler does with it. */
  broken: StepOrderError | null = null;
  /** The last step's record, while it is being written after the step returned. */
  private pending: { name: string; written: Promise<boolean> } | null = null;
  private readonly record: RecordStep;
  /** Records are written in order with the settle: awaited before the next step, not before the handler goes on. */
  private readonly ordered: boolean;

  constructor(
    private readonly store: Store,
    private readonly job: ClaimedJob,
    private readonly clock: Clock,
    /** Told when the handler sleeps: the job goes back to the queue until then. */
    private readonly onSleep: (until: Date) => void,
    private readonly maxBytes = DEFAULT_MAX_PAYLOAD_BYTES,
    /** Local time the handler's signal fires (its lease deadline less the settle margin); no yield when absent. */
    private readonly abortAt = Number.POSITIVE_INFINITY,
    /** The runner's ordered writer of records; each record on its own round trip when absent. */
    record?: RecordStep,
  ) {
    this.record = record ?? recordStepAlone(store);
    this.ordered = record !== undefined;
  }

  /** The step log as JSON for the attempt row, or null when no step was reached. */
  logJson(): string | null {
    return this.log.length > 0 ? JSON.stringify(this.log) : null;
  }

  async step<T>(name: string, fn: () => Promise<T> | T): Promise<T> {
    if (typeof name !== "string" || name.length === 0 || name.length > MAX_STEP_NAME) {
      throw this.fail(`a step name must be a string of 1 to ${MAX_STEP_NAME} characters, got ${JSON.stringify(name)}`);
    }
    if (this.names.has(name)) throw this.fail(`step "${name}" is used twice in one run of job ${this.job.id}: each step needs its own name`);
    this.names.add(name);
    const seq = this.seq++;
    const record = (await this.load()).get(seq);
    if (record) {
      if (record.name !== name) {
        throw this.fail(
          `step ${seq + 1} of job ${this.job.id} is "${name}" in this run but "${record.name}" was recorded: the code changed under the job`,
        );
      }
      this.log.push({ name, replayed: true, ms: 0 });
      return record.result as T;
    }
    // Yield: after at least one step of its own, an attempt whose time left
    // would not fit two more of its longest step ends here, uncharged, and
    // the job goes back to the queue at once to continue under a fresh
    // lease. The step is named again by the next attempt.
    if (this.longestMs > 0 && this.abortAt - this.clock.now() < 2 * this.longestMs) {
      this.names.delete(name);
      this.seq--;
      this.onSleep(new Date(this.clock.now()));
      return new Promise<T>(() => {});
    }
    return this.run(seq, name, fn);
  }

  async sleepUntil(at: Date): Promise<void> {
    if (!(at instanceof Date) || Number.isNaN(at.getTime())) throw new TypeError(`ctx.sleepUntil needs a valid Date, got ${String(at)}`);
    // The wake time is recorded as a step, so a replay sleeps to the same time.
    const until = new Date(await this.step(`sleep ${++this.sleeps}`, () => at.toISOString()));
    if (until.getTime() <= this.clock.now()) return;
    this.onSleep(until);
    // The attempt ends here: the handler is not resumed in this invocation.
    return new Promise<void>(() => {});
  }

  /** The previous step's record is written before anything that may depend on it runs; a record refused means the lease was lost. */
  private async flush(): Promise<void> {
    const pending = this.pending;
    if (!pending) return;
    const written = await pending.written;
    if (this.pending === pending) this.pending = null;
    if (!written) {
      this.failedStep = pending.name;
      throw new LeaseLostError(`step "${pending.name}" of job ${this.job.id} ran but its result was not recorded: the lease was lost`);
    }
  }

  private async run<T>(seq: number, name: string, fn: () => Promise<T> | T): Promise<T> {
    // The yield rule's measure is on the runner's clock, the one its deadline is on.
    const calledAt = this.clock.now();
    await this.flush();
    const startedAt = performance.now();
    this.inFlight = name;
    let value: T;
    try {
      value = await fn();
    } catch (err) {
      this.failedStep = name;
      throw err;
    }
    const json = payloadJson(value, ["step", name], this.maxBytes);
    if ("issues" in json) {
      this.failedStep = name;
      throw new Error(`step "${name}" returned what cannot be recorded: ${json.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
    }
    const ms = performance.now() - startedAt;
    this.pending = {
      name,
      written: this.record({
        id: this.job.id, leaseToken: this.job.leaseToken, seq, name, result: value === undefined ? null : json.json, durationMs: ms,
      }),
    };
    if (!this.ordered) await this.flush();
    this.inFlight = null;
    // What the next step may take: its wait for this record, its function, its record.
    this.longestMs = Math.max(this.longestMs, this.clock.now() - calledAt);
    this.log.push({ name, replayed: false, ms: Math.round(ms * 10) / 10 });
    return value;
  }

  private fail(message: string): StepOrderError {
    this.broken ??= new StepOrderError(message);
    return this.broken;
  }

  /** The recorded steps, read once per attempt; a first attempt has none to read. */
  private load(): Promise<Map<number, Recorded>> {
    if (this.recorded) return this.recorded;
    if (this.job.run <= 1) return (this.recorded = Promise.resolve(new Map()));
    this.recorded = this.store.db
      .query<{ seq: number; name: string; result: unknown; nothing: boolean }>(sql(this.store.schema, LOAD_STEPS), [
        this.job.id, this.job.leaseToken,
      ])
      .then(({ rows }) => new Map(rows.map((r) => [r.seq, { name: r.name, result: r.nothing ? undefined : r.result }])));
    // A failed read is retried by the next step call rather than kept.
    this.recorded.catch(() => (this.recorded = null));
    return this.recorded;
  }
}
