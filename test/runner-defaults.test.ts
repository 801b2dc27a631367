/**
 * A runner's defaults have one source, the config's (`RUNNER_DEFAULTS` in
 * shared/settings/config.ts): a `runWorker` started without them paces itself as a
 * deployed runner with a bare config does. No database: a store that finds
 * nothing and a clock that jumps to each wait, so a run is its queries and
 * its waits, compared whole.
 */
import { describe, expect, it } from "vitest";
import { RUNNER_DEFAULTS, defineConfig } from "../shared/settings/config.ts";
import type { Clock } from "../shared/runner/clock.ts";
import { workerPacing, type WorkerOptions } from "../shared/runner/options.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { createRegistry } from "../shared/jobs/job.ts";

const PACING = ["idleMs", "pollMs", "linger", "fair"] as const;
const pick = (r: Record<(typeof PACING)[number], unknown>) => Object.fromEntries(PACING.map((k) => [k, r[k]]));

/** An idle run on an empty queue: every query (text and values) and every wait, in order, and when it ended. */
async function idleRun(options: Partial<WorkerOptions>) {
  let now = 0;
  const trace: unknown[] = [];
  const clock: Clock = {
    now: () => now,
    after(ms, fn) {
      trace.push({ wait: ms });
      const timer = setTimeout(() => ((now += ms), fn()), 0);
      return () => clearTimeout(timer);
    },
  };
  const db = {
    query: async (text: string, values?: unknown[]) => (trace.push({ text, values }), { rows: [], rowCount: 0 }),
  } as unknown as WorkerOptions["store"]["db"];
  const summary = await runWorker({
    store: { db, schema: "leasehold" }, registry: createRegistry([]), queues: ["default"], runnerId: "r", slots: 4, clock, ...options,
  });
  expect(summary.exit).toBe("idle");
  return { trace, endedAt: now };
}

describe("runner defaults: the config's, and runWorker's without options", () => {
  const config = defineConfig({ edge: {} });
  const lambda = config.runners.runner!;
  const edge = config.edge!.runners["edge-runner"]!;

  it("the config's Lambda and edge runners default to RUNNER_DEFAULTS, and so does runWorker", () => {
    expect(pick(lambda)).toEqual(RUNNER_DEFAULTS);
    expect(pick(edge)).toEqual(RUNNER_DEFAULTS);
    expect(workerPacing({})).toEqual(RUNNER_DEFAULTS);
    // Given options win.
    expect(workerPacing({ idleMs: 7, pollMs: 11, linger: "fixed", fair: false })).toEqual({ idleMs: 7, pollMs: 11, linger: "fixed", fair: false });
  });

  it("runWorker with no options runs as with the config's runner options, query for query and wait for wait", async () => {
    const bare = await idleRun({});
    const configured = await idleRun(pick(lambda) as Partial<WorkerOptions>);
    expect(bare).toEqual(configured);
    // The comparison sees a difference where there is one: a fixed linger waits out idleMs.
    const fixed = await idleRun({ ...(pick(lambda) as Partial<WorkerOptions>), linger: "fixed" });
    expect(fixed.endedAt).toBeGreaterThanOrEqual(lambda.idleMs);
    expect(bare.endedAt).toBeLessThan(lambda.idleMs);
  });
});
