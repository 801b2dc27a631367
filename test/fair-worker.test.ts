import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runFairTenants } from "../bench/fair-tenants.ts";
import { createTestDb, type TestDb } from "./support/db.ts";

/**
 * The tenants case with the real runner (bench/fair-tenants.ts): one tenant
 * has 10,000 ready jobs, five others enqueue 100 jobs each while it drains.
 * Run once with a claim that ignores groups and once with the fair one, on
 * the same database.
 */
describe("a big tenant's backlog and five small tenants, through runWorker (pg driver)", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 10);
  });
  afterAll(() => t.drop());

  it("starts the small tenants' jobs within a second at p95, at the throughput of the unfair claim", async () => {
    const unfair = await runFairTenants(t, "unfair", false);
    const fair = await runFairTenants(t, "fair", true);
    console.log(`small tenants' wait p95: unfair ${unfair.smallWaitP95Ms} ms, fair ${fair.smallWaitP95Ms} ms; ` +
      `jobs/s: unfair ${unfair.jobsPerSecond}, fair ${fair.jobsPerSecond}`);
    expect(unfair.succeeded).toBe(10_500);
    expect(fair.succeeded).toBe(10_500);
    expect(fair.smallWaitP95Ms).toBeLessThanOrEqual(1_000);
    // The test notices a claim that is not fair: behind the unfair claim, the small tenants wait longer.
    expect(unfair.smallWaitP95Ms).toBeGreaterThan(fair.smallWaitP95Ms);
    expect(fair.jobsPerSecond).toBeGreaterThanOrEqual(0.9 * unfair.jobsPerSecond);
  });
});
