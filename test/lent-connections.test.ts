import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { transaction } from "../shared/db/db.ts";
import { createTestDb, drivers, type TestDb } from "./support/db.ts";

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
