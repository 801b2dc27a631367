import { sql, type Queryable, type Store } from "../db/db.ts";
import { JOB_READY_CHANNEL } from "../lifecycle/enqueue-sql.ts";
import type { Clock } from "./clock.ts";
import type { WorkerLog } from "./options.ts";

/**
 * The bell: a runner waiting for work hears of a job as it is enqueued,
 * instead of at its next poll. Once a claim finds its queues drained with
 * room for more, the runner takes one connection of its pool, LISTENs on
 * `leasehold_job_ready` and writes a `listeners` row naming its queues
 * (migration 0016); an enqueue of a job due now on one of them notifies
 * the channel in its own statement (shared/lifecycle/enqueue-sql.ts). A
 * claim that finds work deletes the row (enqueues stop ringing it; a
 * claim that finds none a poll or more later writes it again), and one
 * that fills its batch means the runner is busy: it gives the connection
 * back.
 *
 * A notification only asks for a claim: a missed one (a connection cut, an
 * enqueue that began before the row was written) costs a poll's wait, never
 * a job. Every statement of the bell is bounded by `timeoutMs`; one that
 * fails or hangs drops the connection, and the runner polls without a bell
 * for `retryMs` before listening again. The row expires `ttlMs` after its
 * last renewal, so a runner killed while listening stops being rung.
 */
export interface BellOptions {
  store: Store;
  clock: Clock;
  queues: readonly string[];
  runnerId: string;
  /** A job was enqueued on one of `queues`. */
  onRing: () => void;
  log: WorkerLog;
  /** The listener row lives this long unless renewed (every third of it). */
  ttlMs?: number;
  /** Longest wait for one of the bell's statements. */
  timeoutMs?: number;
  /** After a failure, poll without the bell this long. */
  retryMs?: number;
  /**
   * Arm only once this long has passed since a claim last found work (the
   * runner's poll): a stream that brings work every poll is found by the
   * polls, and ringing for each of its jobs would only add claims.
   */
  quietMs?: number;
}

export const BELL_TTL_MS = 15_000;

/** A pooled client that can LISTEN (`pg`, and the Neon serverless Pool's). */
interface Listener extends Queryable {
  on(event: "notification", fn: (n: { channel: string; payload?: string }) => void): unknown;
  on(event: "error", fn: (err: Error) => void): unknown;
  off(event: "notification", fn: (n: { channel: string; payload?: string }) => void): unknown;
  off(event: "error", fn: (err: Error) => void): unknown;
  release(err?: Error | boolean): void;
}

const REGISTER = `
with gone as (delete from leasehold.listeners where expires_at < now() - interval '1 minute')
insert into leasehold.listeners (runner_id, queues, expires_at)
values ($1::text, $2::text[], now() + $3::integer * interval '1 millisecond')
on conflict (runner_id) do update set queues = excluded.queues, expires_at = excluded.expires_at`;
const RENEW = `update leasehold.listeners set expires_at = now() + $2::integer * interval '1 millisecond' where runner_id = $1::text`;
const UNREGISTER = `delete from leasehold.listeners where runner_id = $1::text`;

export class Bell {
  private client: Listener | null = null;
  private opening: Promise<boolean> | null = null;
  /** Whether the runner wants to listen: `quiet` during an open closes it once open. */
  private wanted = false;
  /** Whether its row is written: enqueues ring it, and it heeds them. */
  private armed = false;
  private retryAt = Number.NEGATIVE_INFINITY;
  private foundAt = Number.NEGATIVE_INFINITY;
  private cancelRenew: () => void = () => {};
  private readonly payloads: Set<string>;
  private readonly ttlMs: number;
  private readonly timeoutMs: number;

  constructor(private readonly o: BellOptions) {
    this.payloads = new Set(o.queues.map((q) => sql(o.store.schema, "leasehold.") + q));
    this.ttlMs = o.ttlMs ?? BELL_TTL_MS;
    this.timeoutMs = o.timeoutMs ?? 5_000;
  }

  /** Whether it listens now. */
  get listening(): boolean {
    return this.client !== null;
  }

  /**
   * A claim found nothing: listens (or, listening, writes its row again);
   * resolves true once this call armed it (the caller then claims once
   * more: a job enqueued before the row was written rang no one), false if
   * it was armed already, could not be, or must wait after a failure.
   */
  listen(): Promise<boolean> {
    this.wanted = true;
    const now = this.o.clock.now();
    if (this.opening || now < this.retryAt || now - this.foundAt < (this.o.quietMs ?? 0)) return Promise.resolve(false);
    if (this.client) return this.armed ? Promise.resolve(false) : this.arm(this.client);
    this.opening = this.open().finally(() => (this.opening = null));
    return this.opening;
  }

  /**
   * A claim found work: enqueues stop ringing this runner (its row is
   * deleted) until a claim finds none again, `quietMs` later. The
   * connection stays listening. So a runner that keeps up with a stream
   * costs its enqueues a notification only when its queue ran empty for a
   * poll in between, not one each.
   */
  found(): void {
    this.foundAt = this.o.clock.now();
    const client = this.client;
    if (!client || !this.armed) return;
    this.armed = false;
    this.bounded(() => client.query(sql(this.o.store.schema, UNREGISTER), [this.o.runnerId])).catch((err) => this.drop(client, err));
  }

  private async arm(client: Listener): Promise<boolean> {
    this.armed = true;
    try {
      await this.bounded(() => this.register(client));
      return true;
    } catch (err) {
      this.drop(client, err);
      return false;
    }
  }

  /** Stops listening and gives the connection back (the runner is busy, or leaving). */
  async quiet(): Promise<void> {
    this.wanted = false;
    if (this.opening) await this.opening;
    if (this.client) await this.close(this.client);
  }

  private async open(): Promise<boolean> {
    const pool = this.o.store.db as Partial<{ connect: () => Promise<unknown> }>;
    if (typeof pool.connect !== "function") return false;
    let client: Listener;
    try {
      client = await this.connect(pool.connect.bind(pool) as () => Promise<Listener>);
    } catch (err) {
      this.failed(err);
      return false;
    }
    client.on("error", this.onError);
    client.on("notification", this.onNotice);
    try {
      await this.bounded(async () => {
        await client.query(`listen ${JOB_READY_CHANNEL}`);
        await this.register(client);
      });
    } catch (err) {
      client.off("notification", this.onNotice);
      letGo(client, this.onError, err);
      this.failed(err);
      return false;
    }
    this.client = client;
    this.armed = true;
    this.renewLater();
    // Told to stop while it was opening (a full claim meanwhile).
    if (!this.wanted) {
      await this.close(client);
      return false;
    }
    return true;
  }

  /** Writes (or rewrites) this runner's listener row: enqueues of its queues ring it from now on. */
  private register(client: Listener): Promise<unknown> {
    return client.query(sql(this.o.store.schema, REGISTER), [this.o.runnerId, this.o.queues, this.ttlMs]);
  }

  /** Deletes the row, stops listening, and gives the connection back (destroyed, if that failed). */
  private async close(client: Listener): Promise<void> {
    this.stopListening(client);
    await this.bounded(async () => {
      await client.query(sql(this.o.store.schema, UNREGISTER), [this.o.runnerId]);
      await client.query(`unlisten ${JOB_READY_CHANNEL}`);
    }).then(
      () => letGo(client, this.onError),
      (err: Error) => letGo(client, this.onError, err),
    );
  }

  /** A connection of the pool, within `timeoutMs`: one that comes later goes straight back. */
  private async connect(connect: () => Promise<Listener>): Promise<Listener> {
    const pending = connect();
    try {
      return await this.bounded(() => pending);
    } catch (err) {
      pending.then((late) => late.release(), () => {});
      throw err;
    }
  }

  private renewLater(): void {
    this.cancelRenew = this.o.clock.after(Math.floor(this.ttlMs / 3), () => {
      const client = this.client;
      if (!client) return;
      if (!this.armed) return this.renewLater();
      this.bounded(() => client.query(sql(this.o.store.schema, RENEW), [this.o.runnerId, this.ttlMs])).then(
        () => this.client === client && this.renewLater(),
        (err: Error) => this.drop(client, err),
      );
    });
  }

  private readonly onNotice = (n: { channel: string; payload?: string }) => {
    if (this.armed && n.channel === JOB_READY_CHANNEL && n.payload !== undefined && this.payloads.has(n.payload)) this.o.onRing();
  };

  /** The connection broke while listening: dropped, and the runner polls until the next try. */
  private readonly onError = (err: Error) => {
    if (this.client) this.drop(this.client, err);
  };

  private drop(client: Listener, err: unknown): void {
    if (this.client !== client) return;
    this.stopListening(client);
    letGo(client, this.onError, err);
    this.failed(err);
  }

  /** No more rings or renewals from `client`; its error listener stays until it is let go. */
  private stopListening(client: Listener): void {
    this.client = null;
    this.armed = false;
    this.cancelRenew();
    client.off("notification", this.onNotice);
  }

  private failed(err: unknown): void {
    this.retryAt = this.o.clock.now() + (this.o.retryMs ?? 5_000);
    this.o.log.warn("not listening for new jobs; polling", { error: String(err) });
  }

  /** `fn`, or a rejection after `timeoutMs` (the caller then destroys the connection). */
  private bounded<T>(fn: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const cancel = this.o.clock.after(this.timeoutMs, () => reject(new Error(`listener statement took over ${this.timeoutMs}ms`)));
      fn().then(
        (v) => (cancel(), resolve(v)),
        (e) => (cancel(), reject(e)),
      );
    });
  }
}

/**
 * Gives `client` back to its pool: as it is, or, after `err`, destroyed.
 * A destroyed connection may still emit an error: it gets a listener that
 * ignores it, where an unheard one would crash the process.
 */
function letGo(client: Listener, onError: (err: Error) => void, err?: unknown): void {
  client.off("error", onError);
  if (err === undefined) return client.release();
  client.on("error", () => {});
  client.release(err instanceof Error ? err : new Error(String(err)));
}
