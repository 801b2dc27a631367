import { randomBytes } from "node:crypto";
import WebSocket from "ws";
import { inject } from "vitest";
import type { Pool, Store } from "../../shared/db/db.ts";
import type { ManualClock } from "./clock.ts";
import { createPgPool } from "../../shared/db/drivers/pg.ts";
import { createNeonPool } from "../../shared/db/drivers/neon.ts";
import { migrate } from "../../shared/db/migrate.ts";

export type Driver = "pg" | "neon";
/** The core suite runs through both database drivers. */
export const drivers: Driver[] = ["pg", "neon"];

export function databaseUrl(): string {
  return inject("databaseUrl");
}

export function createPool(driver: Driver, max = 10, url = databaseUrl()): Pool {
  return driver === "pg"
    ? createPgPool(url, max)
    : createNeonPool(url, { max, wsProxy: inject("wsRelay"), webSocketConstructor: WebSocket });
}

export interface TestDb extends Store {
  pool: Pool;
  /** A plain pg pool on the same schema, for assertions. */
  admin: Pool;
  drop(): Promise<void>;
}

/** A freshly migrated schema of its own, reached through `driver`. */
export async function createTestDb(driver: Driver, poolSize = 10, url = databaseUrl()): Promise<TestDb> {
  const schema = `t_${randomBytes(6).toString("hex")}`;
  const admin = createPgPool(url, 4);
  await migrate(admin, schema);
  const pool = createPool(driver, poolSize, url);
  return {
    db: pool,
    schema,
    pool,
    admin,
    async drop() {
      await pool.end();
      await admin.query(`drop schema "${schema}" cascade`);
      await admin.end();
    },
  };
}

/**
 * A database of its own (for what Postgres counts per database, such as
 * `pg_stat_database.xact_commit`): its URL, and a function that drops it.
 */
export async function createOwnDatabase(): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const name = `leasehold_t_${randomBytes(5).toString("hex")}`;
  const server = createPgPool(databaseUrl(), 1);
  await server.query(`create database ${name}`);
  const url = new URL(databaseUrl());
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      await server.query(`drop database if exists ${name} with (force)`);
      await server.end();
    },
  };
}

/**
 * Time moved in the database instead of waited for: the running jobs that
 * match `where` (SQL on `jobs`, with `values`) get a lease that ran out 1 ms
 * ago, as if their runner had died and the lease had passed. Returns how many.
 */
export async function expireLeases(t: TestDb, where: string, values: unknown[] = []): Promise<number> {
  const { rowCount } = await t.admin.query(
    `update "${t.schema}".jobs set lease_expires_at = now() - interval '1 millisecond' where status = 'running' and (${where})`,
    values,
  );
  return rowCount ?? 0;
}

/**
 * Time moved in the database instead of waited for: the jobs that match
 * `where` (SQL on `jobs`, with `values`) get their stored times (created_at,
 * run_at, debounce_deadline) `ms` earlier, and so do the ends of the throttle
 * windows they stand in, as if `ms` had passed with nothing else happening.
 * Returns how many jobs.
 */
export async function passTime(t: TestDb, ms: number, where = "true", values: unknown[] = []): Promise<number> {
  const by = `($${values.length + 1}::float8 * interval '1 millisecond')`;
  const { rows } = await t.admin.query<{ n: number }>(
    `with moved as (
       update "${t.schema}".jobs set created_at = created_at - ${by}, run_at = run_at - ${by},
         debounce_deadline = debounce_deadline - ${by}
       where (${where}) returning id
     ), windows as (
       update "${t.schema}".throttle_windows set window_ends_at = window_ends_at - ${by} where job_id in (select id from moved)
     )
     select count(*)::integer as n from moved`,
    [...values, ms],
  );
  return rows[0]!.n;
}

/**
 * Time moved for rate limits instead of waited for: every start recorded in
 * the rate windows whose row matches `where` (SQL on `rate_windows`, with
 * `values`), and the `started_at` of those keys' jobs, are made `ms` earlier
 * (later, for a negative `ms`), as if `ms` had passed. Returns how many windows.
 */
export async function passRateWindows(t: TestDb, ms: number, where = "true", values: unknown[] = []): Promise<number> {
  const by = `($${values.length + 1}::float8 * interval '1 millisecond')`;
  const { rows } = await t.admin.query<{ n: number }>(
    `with moved as (
       update "${t.schema}".rate_windows
       set starts = array(select s - ${by} from unnest(starts) with ordinality as u(s, i) order by i)
       where (${where}) returning key
     ), started as (
       update "${t.schema}".jobs set started_at = started_at - ${by} where rate_key in (select key from moved) and started_at is not null
     )
     select count(*)::integer as n from moved`,
    [...values, ms],
  );
  return rows[0]!.n;
}

/**
 * `store` with its queries counted while in flight, and `atRest`: resolves
 * once no query has been in flight for several turns of the event loop (no
 * timer: a runner on a ManualClock is then waiting on that clock, or done).
 */
export function watchedStore(store: Store, options: { connect?: boolean } = {}): { store: Store; atRest(): Promise<void> } {
  let inFlight = 0;
  const pool = store.db as Partial<Pool>;
  const db = {
    // `connect: true`: the pool's clients too, their queries watched (a runner's bell listens on one).
    ...(options.connect && pool.connect ? { connect: async () => watched(await pool.connect!()) } : {}),
    async query<R = Record<string, unknown>>(text: string, values?: unknown[]) {
      inFlight++;
      try {
        return await store.db.query<R>(text, values);
      } finally {
        inFlight--;
      }
    },
  };
  const watched = <C extends object>(client: C): C =>
    new Proxy(client, {
      get(target, key) {
        const value = Reflect.get(target, key, target);
        if (typeof value !== "function") return value;
        if (key !== "query") return value.bind(target);
        return async (...args: unknown[]) => {
          inFlight++;
          try {
            return await value.apply(target, args);
          } finally {
            inFlight--;
          }
        };
      },
    });
  return {
    store: { schema: store.schema, db },
    async atRest() {
      for (let quiet = 0; quiet < 10; ) {
        await new Promise((r) => setImmediate(r));
        quiet = inFlight === 0 ? quiet + 1 : 0;
      }
    },
  };
}

/**
 * Awaits `running` (a runner on `clock`, its store watched by `atRest`),
 * moving time in steps: each time the runner rests, `passed(ms)` moves the
 * database's stored times by the span to the clock's next timer, then the
 * clock is advanced to it. Time passes only while nothing is in flight.
 */
export async function driveOnClock<T>(clock: ManualClock, atRest: () => Promise<void>, running: Promise<T>, passed: (ms: number) => Promise<unknown> = async () => {}): Promise<T> {
  let done = false;
  const result = running.finally(() => {
    done = true;
  });
  result.catch(() => {});
  for (;;) {
    await atRest();
    if (done) return result;
    const due = clock.dueIn();
    if (due === null) throw new Error("the runner neither queries nor waits on its clock");
    if (due > 0) await passed(due);
    await clock.advance(due);
  }
}
