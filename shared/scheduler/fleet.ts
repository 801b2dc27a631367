import { sql, type Pool, type Store, transaction } from "../db/db.ts";

/**
 * The runner fleet as the scheduler sees it: one row per runner invocation
 * that is live or on its way (see migrations/0002_runners.sql).
 */

/**
 * How long a just-invoked runner counts as live before it has started (its
 * cold start, or an asynchronous invoke queued by Lambda). Once started, a
 * runner is trusted only while it renews.
 */
export const STARTING_GRACE_MS = 15_000;
/** A live runner renews its row this often... */
export const HEARTBEAT_MS = 1_000;
/**
 * ...and a runner that stops renewing (killed, frozen) stops counting after
 * this: a wake-up never trusts a runner that has not shown life for 2 s.
 */
export const RUNNER_TTL_MS = 2 * HEARTBEAT_MS;

/** One lock for all schedulers: two passes at once must not both fan out. */
export const SCHEDULER_LOCK = 0x1ea5e402;

const LIVE_RUNNERS = `
select runner, count(*)::integer as live from leasehold.runners
where expires_at > now() group by runner`;

/** The lock, then the fleet as it is once the lock is held: sent with the `begin`, one round trip. */
const LOCKED_LIVE_RUNNERS = `select pg_advisory_xact_lock(${SCHEDULER_LOCK}); ${LIVE_RUNNERS}`;

const RESERVE_RUNNERS = `
insert into leasehold.runners (id, runner, expires_at)
select id, runner, now() + $3::integer * interval '1 millisecond' from unnest($1::text[], $2::text[]) as t(id, runner)`;

/**
 * Runs `plan` with the live runner counts under the scheduler lock, and
 * reserves a row for each invocation it decides on before the lock is let
 * go, so concurrent schedulers see each other's fan-out.
 */
export async function reserveRunners(
  pool: Pool,
  schema: string,
  plan: (live: Map<string, number>) => Map<string, string[]>,
): Promise<Map<string, string[]>> {
  return transaction(pool, async (tx, live) => {
    const decided = plan(new Map((live as { runner: string; live: number }[]).map((r) => [r.runner, r.live])));
    const reserved = [...decided].flatMap(([runner, ids]) => ids.map((id) => [id, runner] as const));
    if (reserved.length > 0) await tx.query(sql(schema, RESERVE_RUNNERS), [reserved.map((r) => r[0]), reserved.map((r) => r[1]), STARTING_GRACE_MS]);
    return decided;
  }, sql(schema, LOCKED_LIVE_RUNNERS));
}

const START_RUNNER = `
insert into leasehold.runners (id, runner, request_id, started_at, expires_at)
values ($1::text, $2::text, $3::text, now(), now() + $4::integer * interval '1 millisecond')
on conflict (id) do update set request_id = excluded.request_id, started_at = now(), expires_at = excluded.expires_at`;

/** A runner announces itself, live for `RUNNER_TTL_MS` unless it renews. */
export async function startRunner(store: Store, args: { id: string; runner: string; requestId: string }): Promise<void> {
  await store.db.query(sql(store.schema, START_RUNNER), [args.id, args.runner, args.requestId, RUNNER_TTL_MS]);
}

const RENEW_RUNNER = `
update leasehold.runners set expires_at = now() + $2::integer * interval '1 millisecond' where id = $1::text`;

/** The runner's heartbeat: still live for another `RUNNER_TTL_MS`. */
export async function renewRunner(store: Store, id: string): Promise<void> {
  await store.db.query(sql(store.schema, RENEW_RUNNER), [id, RUNNER_TTL_MS]);
}

/** A runner leaves: it no longer counts toward the queue's supply. */
export async function stopRunner(store: Store, id: string): Promise<void> {
  await store.db.query(sql(store.schema, "delete from leasehold.runners where id = $1::text"), [id]);
}

const FAILED_RUNNER = `
with gone as (delete from leasehold.runners where id = $1::text and request_id is not null returning id)
update leasehold.runners set expires_at = least(expires_at, now() + $2::integer * interval '1 millisecond')
where id = $1::text and request_id is null`;

/**
 * A runner invocation failed (its on-failure destination says so). One that
 * had started no longer counts. One that failed before it started (in its
 * init) counts `RUNNER_TTL_MS` more, as a runner that stopped renewing
 * would, instead of the rest of its `STARTING_GRACE_MS`: a wake-up does not
 * trust it, and a runner that cannot start is retried every few seconds
 * (its Errors alarm fires), not in a tight loop of failures.
 */
export async function dropFailedRunner(store: Store, id: string): Promise<void> {
  await store.db.query(sql(store.schema, FAILED_RUNNER), [id, RUNNER_TTL_MS]);
}

/** Forgets runners that expired long ago (they died without leaving). */
export async function pruneRunners(store: Store): Promise<number> {
  const { rowCount } = await store.db.query(
    sql(store.schema, "delete from leasehold.runners where expires_at < now() - interval '1 hour'"),
  );
  return rowCount ?? 0;
}

export interface Demand {
  /** Ready jobs across the runner's queues (possibly capped). */
  ready: number;
  /** Runner invocations live or starting. */
  live: number;
  slots: number;
  maxConcurrency: number;
  /** Further runners the database connection budget allows. */
  budget: number;
}

/**
 * How many runners to invoke: enough for the ready jobs that the live
 * runners' slots will not absorb, never above the runner's maximum
 * concurrency or the connection budget. Work a live runner is already
 * draining spawns nothing.
 */
export function runnersToStart({ ready, live, slots, maxConcurrency, budget }: Demand): number {
  const unabsorbed = Math.max(0, ready - live * slots);
  const wanted = Math.ceil(unabsorbed / slots);
  return Math.max(0, Math.min(wanted, maxConcurrency - live, budget));
}
