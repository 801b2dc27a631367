import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { transaction } from "../shared/db/db.ts";
import { queryWithin } from "../shared/db/deadline.ts";
import { createPgPool } from "../shared/db/drivers/pg.ts";
import { systemClock } from "../shared/runner/clock.ts";
import { proxyInFront } from "./support/fault-proxy.ts";
import { createTestDb, databaseUrl, drivers, type TestDb } from "./support/db.ts";

/**
 * A pool takes its own error listener off a connection while it lends it
 * out. A lent connection lost between two statements (a restart, a cut, a
 * terminated backend) must fail the work it was lent for, never emit an
 * unheard `error` that ends the process (vitest reports one as an unhandled
 * error, failing the run). `waitForJob`'s connection: test/results.test.ts.
 */
describe.each(drivers)("a lent connection lost between statements (%s driver)", (driver) => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb(driver, 2);
  });
  afterAll(() => t.drop());

  it("fails the transaction it was lent for; the pool goes on with another", async () => {
    const outcome = await transaction(t.pool, async (tx) => {
      const { rows } = await tx.query<{ pid: number }>("select pg_backend_pid() as pid");
      const pid = rows[0]!.pid;
      await t.admin.query("select pg_terminate_backend($1)", [pid]);
      // Gone from the server, and one more round trip for its last words to
      // arrive, before the next statement is sent: the loss reaches the
      // connection while it is lent and idle.
      while ((await t.admin.query("select 1 from pg_stat_activity where pid = $1", [pid])).rowCount !== 0);
      await t.admin.query("select 1");
      return tx.query("select 1");
    }).then(() => "committed", (err: Error) => err.message);
    expect(outcome).toMatch(/terminat|not queryable|closed/i);
    expect((await t.pool.query<{ n: number }>("select 2 as n")).rows).toEqual([{ n: 2 }]);
  });
});

describe("a connection handed on in the same read that brings its loss", () => {
  it("is heard: the caller it was lent to gets a failed query, the process goes on", async () => {
    const { proxy, url } = await proxyInFront(databaseUrl());
    const pool = createPgPool(url, { max: 1 });
    const admin = createPgPool(databaseUrl(), 1);
    try {
      const pid = (await pool.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;
      const state = async () => (await admin.query<{ state: string }>("select state from pg_stat_activity where pid = $1", [pid])).rows[0]?.state;
      // A query goes out; its answer is held in the proxy once it is sent.
      const first = pool.query("select 1 as one, pg_sleep(0.05)");
      while ((await state()) !== "active");
      proxy.stallAll();
      // A caller waits for the pool's one connection (as a settle does, through queryWithin).
      const second = queryWithin(pool, 5_000, systemClock, "select 2 as two").then(() => "answered", (err: Error) => err.message);
      // The backend answers, then is terminated: the answer and the loss wait in the proxy, then arrive as one read.
      while ((await state()) === "active");
      await admin.query("select pg_terminate_backend($1)", [pid]);
      while ((await state()) !== undefined);
      proxy.resume();
      expect((await first).rows).toEqual([{ one: 1, pg_sleep: "" }]);
      // Lent on by the first query's release, before the loss was read: its query fails, nothing is unheard.
      expect(await second).toMatch(/terminat|not queryable|Connection/i);
      expect((await pool.query<{ n: number }>("select 3 as n")).rows).toEqual([{ n: 3 }]);
    } finally {
      await pool.end();
      await admin.end();
      await proxy.close();
    }
  });
});
