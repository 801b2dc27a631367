import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { createPgPool } from "../shared/db/drivers/pg.ts";
import { loadMigrations, migrate } from "../shared/db/migrate.ts";
import { databaseUrl } from "./support/db.ts";

describe("the migrator", () => {
  const schema = `m_${randomBytes(5).toString("hex")}`;
  const pools = Array.from({ length: 6 }, () => createPgPool(databaseUrl(), 2));
  afterAll(async () => {
    await pools[0]!.query(`drop schema if exists "${schema}" cascade`);
    await Promise.all(pools.map((p) => p.end()));
  });

  it("applies every migration once when six cold starts run it at the same moment", async () => {
    const all = await loadMigrations();
    expect(all.length).toBeGreaterThan(0);
    const results = await Promise.all(pools.map((pool) => migrate(pool, schema)));
    const applied = results.flat().sort();
    expect(applied).toEqual(all.map((m) => m.id).sort());
    const { rows } = await pools[0]!.query<{ id: number }>(`select id from "${schema}".migrations order by id`);
    expect(rows.map((r) => r.id)).toEqual(all.map((m) => m.id));
  });

  it("applies nothing the second time", async () => {
    expect(await migrate(pools[0]!, schema)).toEqual([]);
  });

  it("keeps every object in the configured schema (tables and the attempts view)", async () => {
    const { rows } = await pools[0]!.query<{ table_name: string }>(
      "select table_name from information_schema.tables where table_schema = $1 order by 1",
      [schema],
    );
    expect(rows.map((r) => r.table_name)).toEqual(["attempts", "concurrency_slots", "job_attempts", "job_steps", "jobs", "listeners", "migrations", "rate_windows", "recurring_ticks", "runners", "throttle_windows", "wake_watch"]);
  });

  it("rolls back a failing migration whole and records nothing", async () => {
    const bad = [{ id: 9001, name: "broken", text: "create table leasehold.half (id int); select 1/0;" }];
    await expect(migrate(pools[0]!, schema, bad)).rejects.toThrow(/division by zero/);
    const { rows } = await pools[0]!.query(
      `select (select count(*)::int from "${schema}".migrations where id = 9001) as recorded,
              to_regclass($1) is not null as created`,
      [`"${schema}".half`],
    );
    expect(rows[0]).toEqual({ recorded: 0, created: false });
  });

  it("refuses a schema name that is not a plain identifier", async () => {
    await expect(migrate(pools[0]!, 'x"; drop table y; --')).rejects.toThrow(/invalid schema name/);
  });
});
