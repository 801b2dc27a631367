import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  pruneRunners, renewRunner, reserveRunners, RUNNER_TTL_MS, SCHEDULER_LOCK, STARTING_GRACE_MS, startRunner, stopRunner,
} from "../shared/scheduler/fleet.ts";
import { planRunners } from "../shared/scheduler/fanout.ts";
import { createTestDb, drivers, type TestDb } from "./support/db.ts";

/** The scheduler's view of the runner fleet, on a real database, through either driver (the reservation's lock and read go with its `begin`). */
describe.each(drivers)("the runner fleet (%s driver)", (driver) => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb(driver);
  });
  afterAll(() => t.drop());

  const runnerRows = async () =>
    (await t.admin.query<{ id: string; request_id: string | null; ttl_ms: number }>(
      `select id, request_id, extract(epoch from expires_at - now())::float8 * 1000 as ttl_ms
       from "${t.schema}".runners order by id`)).rows;

  it("two schedulers interleaved at a barrier never reserve beyond the maximum together", async () => {
    const max = 3;
    const seen: number[] = [];
    const plan = (name: string) => (live: Map<string, number>) => {
      const n = live.get("fleet-a") ?? 0;
      seen.push(n);
      return new Map([["fleet-a", Array.from({ length: Math.max(0, max - n) }, (_, i) => `${name}-${i}`)]]);
    };
    // The barrier: a third session holds the schedulers' lock while both start.
    const holder = await t.admin.connect();
    await holder.query("begin");
    await holder.query("select pg_advisory_xact_lock($1::bigint)", [SCHEDULER_LOCK]);
    const first = reserveRunners(t.pool, t.schema, plan("first"));
    const second = reserveRunners(t.pool, t.schema, plan("second"));
    const holderPid = (await holder.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;
    // Until Postgres shows both blocked behind the holder (asked again on each answer; no timer).
    const blocked = async () => (await t.admin.query<{ n: number }>(
      "select count(*)::int as n from pg_stat_activity where $1 = any(pg_blocking_pids(pid))", [holderPid])).rows[0]!.n;
    while ((await blocked()) < 2);
    expect(seen).toEqual([]); // neither has read the fleet: both wait for the lock
    await holder.query("commit");
    holder.release();
    const decided = await Promise.all([first, second]);
    // Whichever went first reserved all three; the other saw them and reserved none.
    expect(seen).toEqual([0, 3]);
    expect(decided.map((d) => d.get("fleet-a")!.length).sort()).toEqual([0, 3]);
    const rows = await runnerRows();
    expect(rows).toHaveLength(3);
    for (const r of rows) expect(r.ttl_ms).toBeLessThanOrEqual(STARTING_GRACE_MS);
  });

  it("a runner takes over its reservation when it starts, renews it, and leaves", async () => {
    const [id] = (await runnerRows()).map((r) => r.id);
    await startRunner(t, { id: id!, runner: "fleet-a", requestId: "req-1" });
    let row = (await runnerRows()).find((r) => r.id === id)!;
    expect(row.request_id).toBe("req-1");
    expect(row.ttl_ms).toBeGreaterThan(RUNNER_TTL_MS - 2_000);
    expect(row.ttl_ms).toBeLessThanOrEqual(RUNNER_TTL_MS);
    await t.admin.query(`update "${t.schema}".runners set expires_at = now() + interval '1 second' where id = $1`, [id]);
    await renewRunner(t, id!);
    row = (await runnerRows()).find((r) => r.id === id)!;
    expect(row.ttl_ms).toBeGreaterThan(RUNNER_TTL_MS - 2_000);
    await stopRunner(t, id!);
    expect((await runnerRows()).map((r) => r.id)).not.toContain(id);
  });

  it("a runner that stops renewing stops counting as supply, and is pruned an hour later", async () => {
    const [recent, old] = (await runnerRows()).map((r) => r.id);
    await t.admin.query(`update "${t.schema}".runners set expires_at = now() - interval '1 second' where id = $1`, [recent]);
    await t.admin.query(`update "${t.schema}".runners set expires_at = now() - interval '2 hours' where id = $1`, [old]);
    const decided = await reserveRunners(t.pool, t.schema, (live) => {
      expect(live.get("fleet-a") ?? 0).toBe(0);
      return new Map();
    });
    expect(decided.size).toBe(0);
    expect(await pruneRunners(t)).toBe(1);
    expect((await runnerRows()).map((r) => r.id)).toEqual([recent]);
  });
});

describe("memory follows the work: which runner function a pass starts (planRunners)", () => {
  const spec = { queues: ["default"], maxLeaseMs: 60_000, slots: 20, maxConcurrency: 10, light: { slots: 4 } };
  const live = (entries: [string, number][] = []) => new Map(entries);

  it("starts one light runner for an isolated job or a trickle, when no runner of it is live", () => {
    expect(planRunners("runner", spec, 1, live(), 13)).toEqual([["runner-light", 1]]);
    expect(planRunners("runner", spec, 4, live(), 13)).toEqual([["runner-light", 1]]);
  });

  it("starts full runners for a burst, or with no light variant", () => {
    expect(planRunners("runner", spec, 5, live(), 13)).toEqual([["runner", 1]]);
    expect(planRunners("runner", spec, 100, live(), 13)).toEqual([["runner", 5]]);
    expect(planRunners("runner", { ...spec, light: undefined }, 1, live(), 13)).toEqual([["runner", 1]]);
  });

  it("counts a live light runner at its own slots and against the concurrency, and never starts a second light one", () => {
    expect(planRunners("runner", spec, 3, live([["runner-light", 1]]), 13)).toEqual([["runner", 0]]);
    expect(planRunners("runner", spec, 30, live([["runner-light", 1]]), 13)).toEqual([["runner", 2]]);
    expect(planRunners("runner", { ...spec, maxConcurrency: 2 }, 300, live([["runner-light", 1]]), 13)).toEqual([["runner", 1]]);
  });

  it("starts nothing beyond the budget", () => {
    expect(planRunners("runner", spec, 1, live(), 0)).toEqual([["runner", 0]]);
    expect(planRunners("runner", spec, 100, live(), 2)).toEqual([["runner", 2]]);
  });
});
