import { describe, expect, it } from "vitest";
import { registry } from "../jobs/index.ts";
import { config, defineConfig, RUNNER_MARGIN_MS } from "../shared/config.ts";

describe("the deployment's configuration and the app's job types", () => {
  it("serves every job type's queue with a runner whose lease limit covers that job's lease", () => {
    for (const type of registry.values()) {
      const runners = Object.entries(config.runners).filter(([, r]) => r.queues.includes(type.queue));
      expect(runners.map(([name]) => name), `a runner for queue ${type.queue} (${type.name})`).not.toEqual([]);
      for (const [name, runner] of runners) {
        // A runner never claims a job whose lease would outlive its time, so a
        // longer lease than its limit would leave the job queued forever.
        expect(type.leaseMs, `${type.name} on ${name}`).toBeLessThanOrEqual(runner.maxLeaseMs);
        expect(runner.timeoutSeconds * 1000).toBeGreaterThanOrEqual(type.leaseMs + RUNNER_MARGIN_MS);
      }
    }
  });

  it("shares claims between groups unless a runner's queues opt out", () => {
    const cfg = defineConfig({ runners: { fair: { queues: ["a"] }, plain: { queues: ["b"], fair: false } } });
    expect([cfg.runners.fair!.fair, cfg.runners.plain!.fair]).toEqual([true, false]);
  });

  it("refuses a runner whose timeout cannot cover its longest lease, naming the field", () => {
    expect(() => defineConfig({ runners: { r: { queues: ["q"], timeoutSeconds: 30, maxLeaseMs: 30_000 } } })).toThrow(
      /runners\.r\.timeoutSeconds|timeoutSeconds/,
    );
  });
});
