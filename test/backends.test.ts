import pg from "pg";
import { afterAll, describe, expect, inject, it } from "vitest";
import { createPgPool } from "../shared/db/drivers/pg.ts";
import { terminateBackends } from "./support/backends.ts";

describe("terminating backends", () => {
  const clients: pg.Client[] = [];
  const admin = createPgPool(inject("databaseUrl"), 1);
  const connect = async (applicationName: string) => {
    const c = new pg.Client({ connectionString: inject("databaseUrl"), application_name: applicationName });
    c.on("error", () => {});
    clients.push(c);
    await c.connect();
    return c;
  };
  afterAll(async () => {
    for (const c of clients) await c.end().catch(() => {});
    await admin.end();
  });

  it("ends every backend of one application_name and no other, never the caller's own", async () => {
    const name = `victim-${process.pid}`;
    const [a, b, other] = [await connect(name), await connect(name), await connect(`bystander-${process.pid}`)];
    expect(await terminateBackends(admin, { applicationName: name })).toBe(2);
    await expect(a.query("select 1")).rejects.toThrow();
    await expect(b.query("select 1")).rejects.toThrow();
    expect((await other.query("select 1 as one")).rows).toEqual([{ one: 1 }]);
    expect((await admin.query("select 1 as one")).rows).toEqual([{ one: 1 }]);
  });
});
