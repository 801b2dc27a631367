import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startFaultProxy, type FaultProxy } from "./support/fault-proxy.ts";
import { proxied, summary, throughFaults } from "./support/lease-faults.ts";

/**
 * Short leases through a faulty network (issue 23): a TCP proxy cuts every
 * connection every 0.5 to 2 s and lets one new connection in ten go silent,
 * never closed, while the workers keep the driver's default 5 s query
 * timeout. A settle must land within its lease all the same (the per-write
 * deadline, shared/db/deadline.ts), so no job that succeeded runs again; and
 * an overrun is aborted and written `timeout` while its lease lasts (the
 * settle margin and the completer's express lane), never left to the rescuer
 * as `lease_expired`. The oracle records every handler start and end.
 *
 * The measurements behind docs/internals.md ("The minimum lease", "Known
 * limits, measured") are a script: `npx tsx test/measure-lease.ts`.
 */

describe("1 s leases through a network that cuts every connection and stalls one in ten", () => {
  let proxy: FaultProxy;
  const adminUrl = inject("databaseUrl");
  beforeAll(async () => {
    const target = new URL(adminUrl);
    proxy = await startFaultProxy({ target: { host: target.hostname, port: Number(target.port || 5432) } });
  });
  afterAll(() => proxy?.close());

  it("runs no succeeded job again, and records every overrun `timeout`", async () => {
    const r = await throughFaults(proxy, adminUrl, proxied(adminUrl, proxy), { cut: true, stall: true }, {
      jobs: 2_000, leaseMs: 1_000, mix: (i) => (i % 50 === 7 ? "overrun" : undefined),
    });
    console.log(JSON.stringify({ ...summary(r), proxy: proxy.counters }));
    expect(proxy.counters.cut).toBeGreaterThan(0);
    expect(proxy.counters.stalled).toBeGreaterThan(0);
    expect.soft(r.crashes).toEqual([]);
    expect.soft(r.drained).toBe(true);
    expect.soft(r.verdict.lost).toEqual([]);
    expect.soft(r.verdict.rerunAfterSuccess, "jobs run again after their handler succeeded").toEqual([]);
    // 40 overrunning jobs, three charged attempts each: every one written `timeout` by its runner, none left to the rescuer
    // (an attempt given back, `released`, is not one: a buffered job whose lease ran out before it started)
    expect.soft(r.outcomes.overrun?.lease_expired, "overrun attempts left to the rescuer").toBeUndefined();
    expect.soft(r.outcomes.overrun?.timeout).toBeGreaterThanOrEqual(80);
    expect.soft(r.verdict.byStatus).toEqual({ succeeded: 1_960, dead: 40 });
  }, 60_000);
});
