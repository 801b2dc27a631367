import { CLAIMS } from "./claim-sql.ts";
import { sql, type Store } from "./db.ts";

/** A job as a runner holds it: enough to run it and to settle it. */
export interface ClaimedJob {
  id: string;
  queue: string;
  name: string;
  payload: unknown;
  /** Attempts charged so far, this one included (1 on the first). */
  attempts: number;
  /** This attempt's number for the life of the job: its attempt row's number. */
  run: number;
  /**
   * Its start is recorded before its handler runs: it was given an attempt
   * back after a death, or this is its last attempt (so a death on it is
   * never given back, and it never starts more than max_attempts times).
   */
  startFirst: boolean;
  maxAttempts: number;
  leaseMs: number;
  backoffMs: number;
  leaseToken: string;
}

export interface ClaimArgs {
  queue: string;
  runnerId: string;
  /** Claim at most this many. */
  limit: number;
  /**
   * The longest lease the caller can still honour (its remaining time less a
   * margin). Jobs whose lease is longer are left for another runner.
   */
  maxLeaseMs: number;
  /** Claim suspects (jobs whose runner died holding them) instead of other jobs. */
  suspects?: boolean;
  /** Only jobs of these types (the ones the runner knows); all types when absent. */
  names?: readonly string[];
  /**
   * Share the claim between the queue's groups (default), or take jobs in
   * priority order whatever their group (a queue that opts out).
   */
  fair?: boolean;
  /**
   * Whether a job it may claim can carry a concurrency limit (a type among
   * `names` declares one). False takes a cheaper statement without the
   * limits; default true.
   */
  limited?: boolean;
}

/** How long a queue whose last fair claim found one group at most is claimed in plain order before it looks again. */
export const FAIR_RECHECK_MS = 250;

/**
 * Per queue, what the previous fair claim saw: the last group it reached (the
 * next starts after it, so a queue with more groups than a claim visits
 * serves them all in turn) and how many groups it found (each group's share
 * of the next claim is the limit over that count). Hints only: any value is
 * correct; a wrong count only locks more rows, or fewer, than needed.
 */
const lastSeen = new Map<string, { group: string; groups: number; at: number }>();

/**
 * Claims up to `limit` ready jobs of one queue in one statement: each gets its
 * attempt and run counted (invariant 1), a fresh lease token (invariant 4), a
 * lease expiry and the runner id. `SKIP LOCKED` keeps concurrent claimers
 * apart (invariant 2); a job held under a lease is `running` and never
 * matches. A fair claim shares the jobs between the groups with ready jobs,
 * in turn, priority ordering each group; every claim admits a job with a
 * concurrency key only while its key has a free slot (shared/claim-sql.ts).
 * The attempt row is written when the attempt ends (settle or rescue); the
 * handler's start is recorded by the runner (`handler_started`), so that a
 * death charges only jobs that had started. Suspects are claimed apart
 * (`suspects: true`), in priority order, to be run alone.
 * Returns the jobs in the order to start them.
 */
export async function claimJobs(store: Store, args: ClaimArgs): Promise<ClaimedJob[]> {
  return (await claimBatch(store, args)).jobs;
}

/** What one claim brought: its jobs, and, when it brought any, whether suspects of its queue wait to run alone. */
export interface ClaimBatch {
  jobs: ClaimedJob[];
  /** Undefined when the claim found no job (the statement returned no row to say). */
  suspectsWaiting?: boolean;
}

/** `claimJobs`, with what the claim saw of suspects waiting. */
export async function claimBatch(store: Store, args: ClaimArgs): Promise<ClaimBatch> {
  if (args.limit <= 0 || args.maxLeaseMs <= 0 || args.names?.length === 0) return { jobs: [] };
  const seenKey = `${store.schema}\u0000${args.queue}`;
  const seen = lastSeen.get(seenKey) ?? { group: "", groups: 0, at: Number.NEGATIVE_INFINITY };
  // One group's fair share is the whole claim: a queue that showed one group
  // at most is claimed in plain order, and looked at again every FAIR_RECHECK_MS.
  const fair = !args.suspects && args.fair !== false && !(seen.groups <= 1 && Date.now() - seen.at < FAIR_RECHECK_MS);
  const statements = args.suspects ? CLAIMS.suspects : fair ? CLAIMS.fair : CLAIMS.plain;
  const text = args.limited === false ? statements.unlimited : statements.limited;
  const { rows } = await store.db.query<ClaimedRow & { ord: string; last_group: string | null; group_count: string; suspects_waiting: boolean }>(
    sql(store.schema, text),
    [
      args.queue, args.limit, Math.floor(Math.min(args.maxLeaseMs, 2 ** 31 - 1)), args.runnerId, args.names ?? null,
      fair ? seen.group : null, fair ? Math.ceil(args.limit / Math.max(1, seen.groups)) : null,
    ],
  );
  const last = rows[0];
  if (fair) {
    lastSeen.set(seenKey, last?.last_group != null
      ? { group: last.last_group, groups: Number(last.group_count), at: Date.now() }
      : { ...seen, groups: 0, at: Date.now() });
  }
  return { jobs: rows.sort((a, b) => Number(a.ord) - Number(b.ord)).map(toClaimed), suspectsWaiting: last?.suspects_waiting };
}

/** A claimed job as the database returns it. */
export interface ClaimedRow {
  id: string;
  queue: string;
  name: string;
  payload: unknown;
  attempts: number;
  runs: number;
  start_first: boolean;
  max_attempts: number;
  lease_ms: number;
  backoff_ms: number;
  lease_token: string;
}

export function toClaimed(r: ClaimedRow): ClaimedJob {
  return {
    id: r.id, queue: r.queue, name: r.name, payload: r.payload, attempts: r.attempts, run: r.runs, startFirst: r.start_first,
    maxAttempts: r.max_attempts, leaseMs: r.lease_ms, backoffMs: r.backoff_ms, leaseToken: r.lease_token,
  };
}

const SUSPECT_WAITING = `
select exists (
  select 1 from leasehold.jobs
  where status = 'queued' and suspect and queue = any($1::text[]) and run_at <= now() and lease_ms <= $2::integer
    and ($3::text[] is null or name = any($3::text[]))
) as waiting`;

/** Whether a suspect is ready in any of `queues`: a look at a tiny partial index. */
export async function suspectWaiting(
  store: Store,
  queues: readonly string[],
  maxLeaseMs: number,
  names?: readonly string[],
): Promise<boolean> {
  const { rows } = await store.db.query<{ waiting: boolean }>(sql(store.schema, SUSPECT_WAITING), [
    queues, Math.floor(Math.min(maxLeaseMs, 2 ** 31 - 1)), names ?? null,
  ]);
  return rows[0]?.waiting ?? false;
}
