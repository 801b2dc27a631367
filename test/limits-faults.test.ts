import { describe, expect, inject, it } from "vitest";
import { FAULT_GROUP_LIMIT } from "./fixtures/fault-jobs.ts";
import { runFaultScenario } from "./support/fault-run.ts";

/**
 * Concurrency limits under SIGKILL: worker processes (test/fixtures/
 * fault-worker.ts, runWorker as shipped) drain jobs spread over 50 keys with
 * a limit of 2 per key, while the test kills a working runner every 0.3 to
 * 0.9 s. The oracle files record every handler start and end as the
 * processes saw them; a killed process's handlers ran until it died.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("concurrency limits through a kill storm", () => {
  it("never runs more than 2 of a key at once, loses nothing, and reruns only what killed runners held", async () => {
    const adminUrl = inject("databaseUrl");
    const jobs = 2_000;
    const r = await runFaultScenario({
      adminUrl, workerUrl: adminUrl, jobs, groups: 50, fleet: { size: 4, slots: 10, poolSize: 4, idleMs: 1_000 }, drainMs: 60_000,
      async faults({ fleet, ended, stopped }) {
        for (let kills = 0; kills < 6 && !stopped() && ended() < 0.7 * jobs; ) {
          await sleep(300 + Math.random() * 600);
          if (fleet.killOne()) kills++;
        }
      },
    });
    const v = r.verdict;
    console.log(JSON.stringify({ maxRunningPerGroup: r.maxRunningPerGroup, killed: r.killed.length, drained: r.drained,
      byStatus: v.byStatus, duplicates: v.duplicates.length, heldByKilled: v.heldByKilled.length, crashes: r.crashes.length }));
    expect(r.killed.length).toBeGreaterThan(0);
    expect(r.maxRunningPerGroup).toBeGreaterThanOrEqual(1);
    expect(r.maxRunningPerGroup).toBeLessThanOrEqual(FAULT_GROUP_LIMIT);
    expect(r.drained).toBe(true);
    expect(v.lost).toEqual([]);
    expect(r.crashes).toEqual([]);
    const held = new Set(v.heldByKilled);
    expect(v.duplicates.filter((id) => !held.has(id)), "jobs run twice that no killed runner held").toEqual([]);
  }, 90_000);
});
