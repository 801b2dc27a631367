import { CLAIMS } from "./claim-sql.ts";
import { RATE_OPENS_AT } from "./rate-limit-sql.ts";
import { hotQuery, sql, type Store } from "../db/db.ts";

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
  /** It has a rate limit key: its claim was its start, so it must start at once. */
  rated?: boolean;
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
  /**
   * Whether a job it may claim can carry a rate limit (a type among `names`
   * declares one): the claim then takes the statement that checks and
   * writes the windows. A rate-limited job's claim is its start, so at most
   * `rateRoom` of them are claimed (the slots free now; default `limit`).
   */
  rated?: boolean;
  rateRoom?: number;
}

/**
 * Per queue, what the previous fair claim saw: the last group it shared the
 * claim with (the next starts after it, so every group with ready jobs gets
 * its turn, claim after claim, whatever the claims' size), and how many
 * groups it found, up to one more than it could share with (each group's
 * share of the next claim is the limit over that count; a count of one means
 * the queue had a single group, and is claimed in plain order until another
 * group shows). Hints only: any value is correct; a wrong count only locks
 * more rows, or fewer, than needed, or costs one plain claim that picks nothing.
 */
const lastSeen = new Map<string, { group: string; groups: number }>();

/**
 * Claims up to `limit` ready jobs of one queue in one statement (two when a
 * queue that had one group shows another: the plain claim that found it
 * picks nothing, and the fair one follows): each gets its
 * attempt and run counted (invariant 1), a fresh lease token (invariant 4), a
 * lease expiry and the runner id. `SKIP LOCKED` keeps concurrent claimers
 * apart (invariant 2); a job held under a lease is `running` and never
 * matches. A fair claim shares the jobs between the groups with ready jobs,
 * in turn, priority ordering each group; every claim admits a job with a
 * concurrency key only while its key has a free slot (shared/lifecycle/claim-sql.ts).
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
  const seen = lastSeen.get(seenKey) ?? { group: "", groups: 0 };
  if (args.suspects || args.fair === false) return claimWith(store, args, args.suspects ? CLAIMS.suspects : CLAIMS.plain, null, null);
  // A queue whose last fair claim found one group is claimed in plain order
  // while no other group has queued jobs; the plain statement then picks
  // nothing, and the fair claim follows at once.
  if (seen.groups === 1) {
    const plain = await claimWith(store, args, CLAIMS.plain, seen.group, null);
    if (plain.jobs.length > 0) return { jobs: plain.jobs, suspectsWaiting: plain.suspectsWaiting };
  }
  const fair = await claimWith(store, args, CLAIMS.fair, seen.group, Math.ceil(args.limit / Math.max(1, seen.groups)));
  lastSeen.set(seenKey, fair.lastGroup != null ? { group: fair.lastGroup, groups: fair.groups } : { group: seen.group, groups: 0 });
  return { jobs: fair.jobs, suspectsWaiting: fair.suspectsWaiting };
}

type ClaimResultRow = ClaimedRow & { ord: number; last_group: string | null; group_count: number; suspects_waiting: boolean };
const byOrd = (a: ClaimResultRow, b: ClaimResultRow) => a.ord - b.ord;

/** One claim statement: `group` and `share` are its $6 and $7 (see shared/lifecycle/claim-sql.ts). */
async function claimWith(
  store: Store,
  args: ClaimArgs,
  statements: (typeof CLAIMS)[keyof typeof CLAIMS],
  group: string | null,
  share: number | null,
): Promise<ClaimBatch & { lastGroup?: string | null; groups: number }> {
  const text = args.rated ? statements.rated : args.limited === false ? statements.unlimited : statements.limited;
  const params: unknown[] = [
    args.queue, args.limit, Math.floor(Math.min(args.maxLeaseMs, 2 ** 31 - 1)), args.runnerId, args.names ?? null, group, share,
  ];
  if (args.rated) params.push(Math.max(0, Math.floor(args.rateRoom ?? args.limit)));
  const { rows } = await hotQuery<ClaimResultRow>(store, sql(store.schema, text), params);
  // What the claim saw comes on its first row in order, the others' are null.
  const first = rows.sort(byOrd)[0];
  return {
    jobs: rows.map((r) => toClaimed(r, args.queue)),
    suspectsWaiting: first?.suspects_waiting ?? undefined,
    lastGroup: first?.last_group,
    groups: first?.group_count ?? 0,
  };
}

/** A claimed job as the database returns it. */
export interface ClaimedRow {
  id: string;
  /** Absent from a claim's rows: the caller knows the queue it claimed from. */
  queue?: string;
  name: string;
  payload: unknown;
  attempts: number;
  runs: number;
  start_first: boolean;
  max_attempts: number;
  lease_ms: number;
  backoff_ms: number;
  lease_token: string;
  rated?: boolean;
}

export function toClaimed(r: ClaimedRow, queue = r.queue!): ClaimedJob {
  return {
    id: r.id, queue, name: r.name, payload: r.payload, attempts: r.attempts, run: r.runs, startFirst: r.start_first,
    maxAttempts: r.max_attempts, leaseMs: r.lease_ms, backoffMs: r.backoff_ms, leaseToken: r.lease_token,
    ...(r.rated ? { rated: true } : {}),
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

/**
 * How long until a rate limit window opens for a ready job of `queues` that a
 * runner could claim: null when no such job waits on a full window.
 */
export async function rateOpensInMs(
  store: Store,
  queues: readonly string[],
  maxLeaseMs: number,
  names?: readonly string[],
): Promise<number | null> {
  const { rows } = await store.db.query<{ opens_at: Date | null; now: Date }>(sql(store.schema, RATE_OPENS_AT), [
    queues, Math.floor(Math.min(maxLeaseMs, 2 ** 31 - 1)), names ?? null,
  ]);
  const r = rows[0];
  return r?.opens_at ? Math.max(0, new Date(r.opens_at).getTime() - new Date(r.now).getTime()) : null;
}
