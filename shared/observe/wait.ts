import { sql, type Queryable, type Store } from "../db/db.ts";
import { describeDeaths } from "./deaths.ts";
import { JOB_ENDED_CHANNEL } from "../lifecycle/settle.ts";
import { systemClock, type Clock } from "../runner/clock.ts";
import { retrying } from "../runner/transient.ts";

/**
 * Awaiting a job's end from a route, without a poll loop: one dedicated
 * connection LISTENs on the job-ended channel, marks the job `awaited`, and
 * reads it once. The settle or rescue that ends an awaited job (succeeded,
 * dead, cancelled) notifies the channel in its own statement, so the waiter
 * reads the job again only when it has ended. Jobs no one awaits send
 * nothing. Works on any pool whose clients emit `notification` events: `pg`,
 * and the Neon serverless Pool (the Postgres protocol over a WebSocket).
 */

/** How an awaited job ended. */
export type JobEnd =
  | { id: string; status: "succeeded"; result: unknown; finishedAt: Date }
  | { id: string; status: "dead"; finishedAt: Date; lastError: string | null; reasons: string[] }
  | { id: string; status: "cancelled"; finishedAt: Date };

export interface WaitOptions {
  /** Give up after this long: a `WaitTimeoutError`, and the job is left as it is. */
  timeoutMs: number;
  /** Aborting stops the wait with the signal's reason; the job is left as it is. */
  signal?: AbortSignal;
}

/** The job did not end within the wait; it was not changed. */
export class WaitTimeoutError extends Error {
  override name = "WaitTimeoutError";
  constructor(
    readonly jobId: string,
    readonly timeoutMs: number,
    readonly status: string,
  ) {
    super(`job ${jobId} did not end within ${timeoutMs}ms (it is ${status}); the wait left it alone`);
  }
}

/** A connection that can LISTEN: a pooled client that emits notifications. */
interface Listener extends Queryable {
  on(event: "notification", fn: (n: { channel: string; payload?: string }) => void): unknown;
  on(event: "error", fn: (err: Error) => void): unknown;
  off(event: "notification", fn: (n: { channel: string; payload?: string }) => void): unknown;
  off(event: "error", fn: (err: Error) => void): unknown;
  release(err?: Error | boolean): void;
}

const MARK_AWAITED = `update leasehold.jobs set awaited = true where id = $1::bigint and status in ('queued', 'running') and not awaited`;
const READ_END = `select status::text, result, finished_at, last_error from leasehold.jobs where id = $1::bigint`;
const TERMINAL = new Set(["succeeded", "dead", "cancelled"]);
const MAX_TIMEOUT_MS = 2_147_483_647;

type EndRow = { status: string; result: unknown; finished_at: Date | null; last_error: string | null };

/**
 * Resolves when job `id` has ended: its result once it succeeded, its
 * reasons (every attempt's) once it is dead, or its cancellation. Rejects
 * with a `WaitTimeoutError` after `timeoutMs`, with the signal's reason when
 * `signal` aborts, and with an Error when the job does not exist. Holds one
 * connection of the store's pool while it waits; if that connection is lost,
 * it takes another (retrying with backoff while the timeout allows) and reads
 * the job again, so a notification missed meanwhile costs nothing.
 */
export function waitForJob(store: Store, id: string, options: WaitOptions): Promise<JobEnd> {
  return waitForJobOn(systemClock, store, id, options);
}

/** `waitForJob` with its timeout on `clock` (tests pass one they move). */
export async function waitForJobOn(clock: Clock, store: Store, id: string, options: WaitOptions): Promise<JobEnd> {
  if (!/^[1-9]\d{0,18}$/.test(id)) throw new Error(`waitForJob: ${JSON.stringify(id)} is not a job id`);
  if (!(options.timeoutMs >= 0 && options.timeoutMs <= MAX_TIMEOUT_MS)) {
    throw new Error(`waitForJob: timeoutMs must be between 0 and ${MAX_TIMEOUT_MS}, got ${options.timeoutMs}`);
  }
  options.signal?.throwIfAborted();
  const pool = store.db as Partial<{ connect: () => Promise<unknown> }>;
  if (typeof pool.connect !== "function") throw new Error("waitForJob needs a pool (a Store whose db can connect a client to LISTEN on)");
  const connect = pool.connect.bind(pool) as () => Promise<Listener>;
  // A lost connection (a restart, a cut, a terminated backend) costs the wait
  // nothing but a reconnect: the job's state is in its row, read again once
  // listening on the next connection. The timeout is the whole wait's.
  const until = clock.now() + options.timeoutMs;
  return retrying(() => waitOn(clock, connect, store, id, options, until), { clock, until: () => until });
}

/** One connection's wait: LISTEN, mark, read, then the notification, the timeout, the abort or the connection's loss. */
async function waitOn(
  clock: Clock, connect: () => Promise<Listener>, store: Store, id: string, options: WaitOptions, until: number,
): Promise<JobEnd> {
  options.signal?.throwIfAborted();
  const client = await connect();
  const payload = sql(store.schema, "leasehold.") + id;
  let ended = false;
  let lost: Error | undefined;
  let wake: () => void = () => {};
  const onNotice = (n: { channel: string; payload?: string }) => {
    if (n.channel !== JOB_ENDED_CHANNEL || n.payload !== payload) return;
    ended = true;
    wake();
  };
  // A lent connection has no listener of its pool's: unheard, its error would end the process.
  const onError = (err: Error) => {
    lost ??= err;
    wake();
  };
  client.on("error", onError);
  client.on("notification", onNotice);
  let broken: Error | undefined;
  try {
    await client.query(`listen ${JOB_ENDED_CHANNEL}`);
    await client.query(sql(store.schema, MARK_AWAITED), [id]);
    let row = await readEnd(client, store, id);
    if (!TERMINAL.has(row.status)) {
      await untilEnded(clock, until, options, () => ended || lost !== undefined, (fn) => (wake = fn), () => row.status, id);
      if (lost) throw lost;
      row = await readEnd(client, store, id);
    }
    return await toEnd(store, id, row);
  } catch (err) {
    if (!(err instanceof WaitTimeoutError) && !options.signal?.aborted) broken = err as Error;
    throw err;
  } finally {
    client.off("notification", onNotice);
    // A broken connection is destroyed and keeps its listener: it may still report its end.
    if (broken) client.release(broken);
    else {
      await client.query(`unlisten ${JOB_ENDED_CHANNEL}`).then(
        () => (client.off("error", onError), client.release()),
        (err: Error) => client.release(err),
      );
    }
  }
}

async function readEnd(db: Queryable, store: Store, id: string): Promise<EndRow> {
  const { rows } = await db.query<EndRow>(sql(store.schema, READ_END), [id]);
  if (!rows[0]) throw new Error(`waitForJob: job ${id} does not exist`);
  return rows[0];
}

/** Waits for the notification, the timeout or the abort, whichever comes first. */
function untilEnded(
  clock: Clock, until: number, options: WaitOptions, ended: () => boolean, onWake: (fn: () => void) => void, status: () => string, id: string,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (err?: unknown) => {
      cancelTimer();
      options.signal?.removeEventListener("abort", onAbort);
      if (err) reject(err);
      else resolve();
    };
    const onAbort = () => done(options.signal!.reason);
    const cancelTimer = clock.after(until - clock.now(), () => done(new WaitTimeoutError(id, options.timeoutMs, status())));
    options.signal?.addEventListener("abort", onAbort, { once: true });
    onWake(() => done());
    // An abort or a notification that came while the job was being read.
    if (options.signal?.aborted) onAbort();
    else if (ended()) done();
  });
}

async function toEnd(store: Store, id: string, row: EndRow): Promise<JobEnd> {
  const finishedAt = new Date(row.finished_at!);
  if (row.status === "succeeded") return { id, status: "succeeded", result: row.result ?? null, finishedAt };
  if (row.status === "cancelled") return { id, status: "cancelled", finishedAt };
  const [death] = await describeDeaths(store, [id]);
  return { id, status: "dead", finishedAt, lastError: row.last_error, reasons: death?.reasons ?? [] };
}
