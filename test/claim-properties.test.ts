import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { claimJobs, type ClaimedJob } from "../shared/lifecycle/claim.ts";
import { enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { defineJob } from "../shared/jobs/job.ts";
import { rescueExpiredLeases } from "../shared/lifecycle/rescue.ts";
import { completeJobs, failJobs, releaseJobs } from "../shared/lifecycle/settle.ts";
import { createTestDb, expireLeases, type TestDb } from "./support/db.ts";

const payload = z.object({ key: z.string(), n: z.number().int() });
const limited = (limit: number) =>
  defineJob({ name: `limited-${limit}`, schema: payload, handler: () => {}, leaseMs: 60_000, backoffMs: 0, maxAttempts: 100,
    concurrency: { limit, key: (p) => p.key } });
const grouped = defineJob({ name: "grouped", schema: z.object({ n: z.number().int() }), handler: () => {} });

/** Generated against real Postgres: fair shares and limits hold whatever the mix. */
describe("the claim, with generated workloads (pg driver)", () => {
  let t: TestDb;
  let queueNo = 0;
  beforeAll(async () => {
    t = await createTestDb("pg", 4);
  });
  afterAll(() => t.drop());

  it("gives every group with a ready job a place in a claim as large as the groups, each group in priority order", async () => {
    const groups = fc.array(fc.array(fc.integer({ min: -2, max: 2 }), { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 8 });
    await fc.assert(
      fc.asyncProperty(groups, fc.integer({ min: 0, max: 10 }), async (priorities, extra) => {
        const queue = `p${queueNo++}`;
        const specs = priorities.flatMap((ps, g) => ps.map((priority, n) => job(grouped, { n }, { queue, group: `g${g}`, priority })));
        const ids = await enqueueJobs(t, specs);
        const info = new Map(ids.map((r, i) => [r.id, { group: specs[i]!.options!.group!, priority: specs[i]!.options!.priority! }]));
        const limit = priorities.length + extra;
        const claimed = await claimJobs(t, { queue, runnerId: "r", limit, maxLeaseMs: 60_000 });
        const total = specs.length;
        expect(claimed).toHaveLength(Math.min(limit, total));
        expect(new Set(claimed.map((j) => info.get(j.id)!.group)).size).toBe(priorities.length);
        // Within a group: highest priority first, then enqueue order; and no later job before an earlier one.
        for (let g = 0; g < priorities.length; g++) {
          const mine = claimed.filter((j) => info.get(j.id)!.group === `g${g}`).map((j) => ({ id: BigInt(j.id), p: info.get(j.id)!.priority }));
          const all = ids.filter((r) => info.get(r.id)!.group === `g${g}`).map((r) => ({ id: BigInt(r.id), p: info.get(r.id)!.priority }))
            .sort((a, b) => b.p - a.p || (a.id < b.id ? -1 : 1));
          expect(mine.map((j) => j.id)).toEqual(all.slice(0, mine.length).map((j) => j.id));
        }
      }),
      { numRuns: 25 },
    );
  });

  it("takes the due jobs first by priority, then in enqueue order, and never a delayed one, whatever the priorities", async () => {
    // Seven priorities: the claim reads four one at a time, the rest in one scan (migration 0018).
    const jobs = fc.array(fc.record({ priority: fc.integer({ min: -3, max: 3 }), later: fc.boolean() }), { minLength: 1, maxLength: 30 });
    await fc.assert(
      fc.asyncProperty(jobs, fc.integer({ min: 1, max: 35 }), fc.boolean(), async (list, limit, fair) => {
        const queue = `d${queueNo++}`;
        const runAt = new Date(Date.now() + 3_600_000);
        const specs = list.map(({ priority, later }, n) => job(grouped, { n }, { queue, priority, ...(later ? { runAt } : {}) }));
        const ids = await enqueueJobs(t, specs);
        const due = ids.map((r, i) => ({ id: BigInt(r.id), ...list[i]! })).filter((j) => !j.later)
          .sort((a, b) => b.priority - a.priority || (a.id < b.id ? -1 : 1));
        const claimed = await claimJobs(t, { queue, runnerId: "r", limit, maxLeaseMs: 60_000, fair });
        expect(claimed.map((j) => BigInt(j.id))).toEqual(due.slice(0, limit).map((j) => j.id));
      }),
      { numRuns: 40 },
    );
  });

  it("never holds more running jobs of a key than its limit, through any mix of claims, settles and rescues", async () => {
    const step = fc.oneof(
      fc.record({ op: fc.constant("claim" as const), limit: fc.integer({ min: 1, max: 8 }), fair: fc.boolean() }),
      fc.record({ op: fc.constantFrom("complete" as const, "fail" as const, "release" as const, "abandon" as const), share: fc.double({ min: 0, max: 1, noNaN: true }) }),
      fc.record({ op: fc.constant("rescue" as const) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 4 }), fc.array(step, { minLength: 5, maxLength: 25 }),
        async (limit, keys, steps) => {
          const queue = `l${queueNo++}`;
          const type = limited(limit);
          await enqueueJobs(t, Array.from({ length: 12 }, (_, n) => job(type, { key: `k${n % keys}`, n }, { queue })));
          let held: ClaimedJob[] = [];
          for (const s of steps) {
            if (s.op === "claim") {
              held.push(...(await claimJobs(t, { queue, runnerId: "r", limit: s.limit, maxLeaseMs: 60_000, fair: s.fair })));
            } else if (s.op === "rescue") {
              await expireLeases(t, "queue = $1", [queue]); // every lease runs out (moved into the past, not waited for)
              await rescueExpiredLeases(t);
              held = [];
            } else {
              const some = held.slice(0, Math.ceil(held.length * s.share));
              held = held.slice(some.length);
              if (s.op === "complete") await completeJobs(t, some);
              if (s.op === "fail") await failJobs(t, some.map((j) => ({ ...j, outcome: "failed" as const, error: "e", retryDelayMs: 0 })));
              if (s.op === "release") await releaseJobs(t, some);
              // "abandon": the runner dies holding them; only a rescue frees them.
            }
            const { rows } = await t.admin.query<{ key: string; n: number }>(
              `select concurrency_key as key, count(*)::int as n from "${t.schema}".jobs
               where queue = $1 and status = 'running' group by 1 having count(*) > $2`, [queue, limit]);
            expect(rows).toEqual([]);
          }
        }),
      { numRuns: 20 },
    );
  });
});
