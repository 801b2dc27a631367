import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { defineJob } from "../shared/jobs/job.ts";
import { rescueExpiredLeases } from "../shared/lifecycle/rescue.ts";
import { systemClock } from "../shared/runner/clock.ts";
import { executeJob } from "../shared/runner/executor.ts";
import { settleJobs } from "../shared/lifecycle/settle.ts";
import { createTestDb, type TestDb } from "./support/db.ts";

/**
 * A property of durable steps, driven through the core one attempt at a
 * time: for random step counts and random faults (a step that throws, a
 * death inside a step, a death between steps), the job's final result
 * equals a run without faults, and no step whose result was recorded runs
 * again. A death is an attempt that is never settled: its lease is made to
 * expire and the rescuer re-queues the job, as after a SIGKILL.
 */

type Fault = { step: number; kind: "throw" | "die-inside" | "die-after" };
class Death extends Error {
  override name = "Death";
}

describe("durable steps, property", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 4);
  });
  afterAll(() => t.drop());

  it("the final result equals a fault-free run, and no completed step runs twice", { timeout: 120_000 }, async () => {
    let faults: Fault[] = [];
    let runs: number[] = [];
    let completed = new Set<number>();
    let violations: string[] = [];
    let cases = 0;
    const type = defineJob({
      name: "prop", queue: "prop", backoffMs: 0, maxAttempts: 100, schema: z.object({ steps: z.number().int() }),
      handler: async ({ steps }, ctx) => {
        let acc = 0;
        for (let i = 0; i < steps; i++) {
          acc = await ctx.step(`s${i}`, async () => {
            if (completed.has(i)) violations.push(`step ${i} ran again after it was recorded`);
            runs[i] = (runs[i] ?? 0) + 1;
            const fault = faults[0]?.step === i && faults[0].kind !== "die-after" ? faults.shift() : undefined;
            if (fault?.kind === "throw") throw new Error(`fault in s${i}`);
            if (fault?.kind === "die-inside") throw new Death();
            return acc * 3 + i + 1;
          });
          completed.add(i);
          if (faults[0]?.step === i && faults[0].kind === "die-after") throw (faults.shift(), new Death());
        }
        return acc;
      },
    });
    const faultFree = (steps: number) => Array.from({ length: steps }, (_, i) => i).reduce((acc, i) => acc * 3 + i + 1, 0);

    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }).chain((steps) =>
          fc.record({
            steps: fc.constant(steps),
            faults: fc.array(fc.record({ step: fc.integer({ min: 0, max: steps - 1 }), kind: fc.constantFrom("throw" as const, "die-inside" as const, "die-after" as const) }), { maxLength: 5 }),
          }),
        ),
        async ({ steps, faults: plan }) => {
          // Faults fire in step order as the job gets there; one at a step already recorded never fires.
          faults = [...plan].sort((a, b) => a.step - b.step);
          runs = [];
          completed = new Set();
          violations = [];
          // A queue per case: a failing case leaves nothing for the next to claim.
          const queue = `prop-${++cases}`;
          const { id } = await enqueue(t, type, { steps }, { queue });
          for (let attempt = 0; attempt < 50; attempt++) {
            const [claimed] = await claimJobs(t, { queue, runnerId: "prop", limit: 1, maxLeaseMs: 60_000 });
            if (!claimed) break;
            await settleJobs(t, { started: [claimed] });
            let died = false;
            const outcome = await executeJob({
              job: claimed, type, deadline: Date.now() + 60_000, clock: systemClock, store: t,
              context: { runnerId: "prop", enqueue: () => Promise.reject(new Error("unused")) },
            });
            if (outcome.outcome === "failed" && outcome.error.includes("Death")) died = true;
            if (died) {
              // The runner is gone: its lease runs out and the rescuer re-queues the job.
              await t.admin.query(`update "${t.schema}".jobs set lease_expires_at = now() - interval '1 ms' where id = $1`, [id]);
              await rescueExpiredLeases(t, { random: () => 0 });
            } else if (outcome.outcome === "succeeded") {
              await settleJobs(t, { succeeded: [{ ...claimed, result: outcome.result, steps: outcome.steps }] });
            } else if (outcome.outcome === "failed" || outcome.outcome === "timeout") {
              await settleJobs(t, { failed: [{ ...claimed, outcome: outcome.outcome, error: outcome.error, retryDelayMs: 0, steps: outcome.steps }] });
            }
          }
          const { rows } = await t.admin.query<{ status: string; result: unknown }>(`select status::text, result from "${t.schema}".jobs where id = $1`, [id]);
          expect(rows[0]).toEqual({ status: "succeeded", result: faultFree(steps) });
          expect(violations).toEqual([]);
          // A step ran more than once only when a fault hit it before its record.
          const hits = (i: number) => plan.filter((f) => f.step === i && f.kind !== "die-after").length;
          for (let i = 0; i < steps; i++) expect(runs[i]).toBeLessThanOrEqual(1 + hits(i));
        },
      ),
      { numRuns: 60 },
    );
  });
});
