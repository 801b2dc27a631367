import type { Queryable } from "../../shared/db/db.ts";
import type { OracleEvent } from "./oracle.ts";

/**
 * Judges a fault run from two independent records: the oracle (what
 * handlers did, per process) and the database (what Leasehold recorded).
 * Pure: the caller reads both (`readJobRows`, `readOracle`).
 */

export interface JobRow {
  id: string;
  status: string;
  /** The jobs.attempts column: attempts charged (a release gives one back). */
  attempts: number;
  /** Attempts (the attempts view) other than `released`: attempts recorded as used. */
  chargedRows: number;
}

export interface FaultVerdict {
  jobs: number;
  byStatus: Record<string, number>;
  /** Enqueued but missing, or neither terminal nor pending (`queued`) at the end. */
  lost: string[];
  /** `dead` with no handler start at all. */
  deadNeverStarted: string[];
  /** Charged an attempt (column or attempt rows) without a handler start at all. */
  chargedNeverStarted: string[];
  /** Charged attempt numbers (1..attempts) with no handler start of that attempt, over all jobs. */
  attemptsChargedWithoutStart: number;
  /** A handler ended successfully, then the job started again (a settle that never landed). */
  rerunAfterSuccess: string[];
  /** Jobs whose handler started more than once. */
  duplicates: string[];
  /** Jobs a killed process held: started there, with no accepted settle written by it. */
  heldByKilled: string[];
  /** The narrower set: started in a killed process, handler never ended there. */
  runningInKilled: string[];
  /** Most handlers of one group key running at once (open intervals end at their process's last event). */
  maxConcurrentPerGroup: Record<string, number>;
}

const TERMINAL = new Set(["succeeded", "dead", "cancelled"]);

export async function readJobRows(db: Queryable, schema: string): Promise<JobRow[]> {
  const { rows } = await db.query<JobRow>(
    `select j.id::text, j.status::text, j.attempts,
            (select count(*)::int from "${schema}".attempts a where a.job_id = j.id and a.outcome <> 'released') as "chargedRows"
     from "${schema}".jobs j order by j.id`,
  );
  return rows;
}

export function checkFaults(input: {
  enqueued: readonly string[];
  rows: readonly JobRow[];
  events: readonly OracleEvent[];
  /** Processes the test SIGKILLed: what they held may run again. */
  killedPids?: ReadonlySet<number>;
}): FaultVerdict {
  const killed = input.killedPids ?? new Set<number>();
  const byJob = new Map<string, OracleEvent[]>();
  const lastEventOf = new Map<number, number>();
  for (const ev of input.events) {
    (byJob.get(ev.job) ?? byJob.set(ev.job, []).get(ev.job)!).push(ev);
    lastEventOf.set(ev.pid, Math.max(lastEventOf.get(ev.pid) ?? 0, ev.t));
  }
  const rows = new Map(input.rows.map((r) => [r.id, r]));
  const v: FaultVerdict = {
    jobs: input.enqueued.length, byStatus: {}, lost: [], deadNeverStarted: [], chargedNeverStarted: [],
    attemptsChargedWithoutStart: 0, rerunAfterSuccess: [], duplicates: [], heldByKilled: [], runningInKilled: [],
    maxConcurrentPerGroup: {},
  };

  for (const id of input.enqueued) {
    const row = rows.get(id);
    const events = byJob.get(id) ?? [];
    const starts = events.filter((e) => e.e === "start");
    if (!row) {
      v.lost.push(id);
      continue;
    }
    v.byStatus[row.status] = (v.byStatus[row.status] ?? 0) + 1;
    if (!TERMINAL.has(row.status) && row.status !== "queued") v.lost.push(id);
    if (row.status === "dead" && starts.length === 0) v.deadNeverStarted.push(id);
    if ((row.attempts > 0 || row.chargedRows > 0) && starts.length === 0) v.chargedNeverStarted.push(id);
    const startedAttempts = new Set(starts.map((s) => s.attempt));
    for (let a = 1; a <= Math.max(row.attempts, row.chargedRows); a++) if (!startedAttempts.has(a)) v.attemptsChargedWithoutStart++;
    if (starts.length > 1) v.duplicates.push(id);

    // Held by a killed process: started there, no accepted settle of that attempt written by it.
    const settledBy = (pid: number, attempt: number) =>
      events.some((e) => e.e === "settled" && e.pid === pid && e.attempt === attempt && e.accepted);
    const endedIn = (pid: number, attempt: number) => events.some((e) => e.e === "end" && e.pid === pid && e.attempt === attempt);
    const inKilled = starts.filter((s) => killed.has(s.pid));
    if (inKilled.some((s) => !settledBy(s.pid, s.attempt))) v.heldByKilled.push(id);
    if (inKilled.some((s) => !endedIn(s.pid, s.attempt))) v.runningInKilled.push(id);

    // Ran again after a success the runner had in hand and was alive to write.
    const excused = (e: OracleEvent) => killed.has(e.pid) && !settledBy(e.pid, e.attempt);
    const success = events.find((e) => e.e === "end" && e.ok && !excused(e));
    if (success && starts.some((s) => s.t > success.t)) v.rerunAfterSuccess.push(id);
  }

  v.maxConcurrentPerGroup = maxConcurrentPerGroup(input.events, lastEventOf);
  return v;
}

/** Sweep over handler intervals per group key. */
function maxConcurrentPerGroup(events: readonly OracleEvent[], lastEventOf: Map<number, number>): Record<string, number> {
  const ends = new Map<string, number>();
  for (const e of events) if (e.e === "end") ends.set(`${e.job}/${e.attempt}/${e.pid}`, e.t);
  const edges = new Map<string, { t: number; d: number }[]>();
  for (const e of events) {
    if (e.e !== "start" || e.g === undefined) continue;
    const end = ends.get(`${e.job}/${e.attempt}/${e.pid}`) ?? lastEventOf.get(e.pid) ?? e.t;
    const list = edges.get(e.g) ?? edges.set(e.g, []).get(e.g)!;
    list.push({ t: e.t, d: 1 }, { t: end, d: -1 });
  }
  const out: Record<string, number> = {};
  for (const [g, list] of edges) {
    // At equal times an end comes before a start: touching intervals do not overlap.
    list.sort((a, b) => a.t - b.t || a.d - b.d);
    let now = 0;
    let max = 0;
    for (const { d } of list) max = Math.max(max, (now += d));
    out[g] = max;
  }
  return out;
}
