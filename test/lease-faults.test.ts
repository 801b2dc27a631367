import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startEmbeddedPostgres, type RunningPostgres } from "../dev/embedded-postgres.ts";
import { startFaultProxy, type FaultProxy } from "./support/fault-proxy.ts";
import { runFaultScenario, type FaultRunOptions, type FaultRunResult } from "./support/fault-run.ts";

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
 * LEASE_MEASURE=1 runs the measurements behind docs/internals.md ("Known
 * limits, measured"; the minimum lease) instead: settle latency under cuts,
 * stalls and a restart, repeated runs, and what a blocking handler costs.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
// Two runner processes, not the four of test/faults.test.ts: on a two-core host four of them (with Postgres, the
// proxy and vitest) starve each other of CPU for up to a second, which no lease of 1 s survives (the measurements
// run both).
const FLEET = { size: Number(process.env.LEASE_FLEET ?? "2"), slots: 10, poolSize: 4, idleMs: 1_000 };
const measuring = process.env.LEASE_MEASURE === "1";

function summary(r: FaultRunResult) {
  const v = r.verdict;
  return {
    durationMs: r.durationMs, drained: r.drained, crashes: r.crashes.length, hung: r.hung.length, byStatus: v.byStatus,
    lost: v.lost.length, rerunAfterSuccess: v.rerunAfterSuccess.length, chargedNeverStarted: v.chargedNeverStarted.length,
    outcomes: r.outcomes, settleMs: r.settleMs, rescued: r.rescued,
  };
}

/** Runs one scenario through `proxy` with cuts and stalls as asked. */
async function throughFaults(
  proxy: FaultProxy, adminUrl: string, workerUrl: string, faults: { cut?: boolean; stall?: boolean },
  o: Partial<FaultRunOptions> & { jobs: number },
): Promise<FaultRunResult> {
  proxy.stallFraction(faults.stall ? 0.1 : 0, { afterBytes: 2_000 });
  const r = await runFaultScenario({
    adminUrl, workerUrl, fleet: FLEET, drainMs: 50_000, queryTimeoutMs: 5_000, ...o,
    async faults({ stopped }) {
      if (faults.cut) proxy.cutEvery(500, 2_000);
      while (!stopped()) await sleep(50);
      proxy.stopCutting();
    },
  });
  proxy.stallFraction(0);
  return r;
}

function proxied(url: string, proxy: FaultProxy): string {
  const u = new URL(url);
  u.hostname = proxy.host;
  u.port = String(proxy.port);
  return u.toString();
}

describe.skipIf(measuring)("1 s leases through a network that cuts every connection and stalls one in ten", () => {
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

describe.runIf(measuring)("measurements for the minimum lease and the blocking handler's cost", () => {
  let server: RunningPostgres;
  let proxy: FaultProxy;
  beforeAll(async () => {
    server = await startEmbeddedPostgres();
    const target = new URL(server.url);
    proxy = await startFaultProxy({ target: { host: target.hostname, port: Number(target.port || 5432) } });
  }, 60_000);
  afterAll(async () => {
    await proxy?.close();
    await server?.stop();
  });
  const reps = Number(process.env.LEASE_REPS ?? "3");
  const leases = (process.env.LEASE_MS ?? "1000").split(",").map(Number);
  const line = (what: string, r: FaultRunResult) => console.log(`MEASURE ${JSON.stringify({ what, ...summary(r) })}`);

  it("settle latency under cuts, stalls and restarts, and repeated runs", async () => {
    for (const leaseMs of leases) {
      for (let rep = 0; rep < reps; rep++) {
        for (const faults of [{ cut: true }, { stall: true }, { cut: true, stall: true }]) {
          const r = await throughFaults(proxy, server.url, proxied(server.url, proxy), faults, {
            jobs: 2_000, leaseMs, mix: (i) => (i % 50 === 7 ? "overrun" : undefined),
          });
          line(`lease ${leaseMs} ${JSON.stringify(faults)} rep ${rep}`, r);
        }
        const r = await runFaultScenario({
          adminUrl: server.url, workerUrl: server.url, jobs: 2_000, fleet: FLEET, drainMs: 60_000, leaseMs, queryTimeoutMs: 5_000,
          mix: (i) => (i % 50 === 7 ? "overrun" : undefined),
          async faults({ ended, stopped }) {
            while (!stopped() && ended() < 800) await sleep(50);
            if (!stopped()) await server.restart();
          },
        });
        line(`lease ${leaseMs} restart rep ${rep}`, r);
      }
    }
  }, 3_600_000);

  it("what one blocking handler costs its neighbours", async () => {
    for (const blockMs of (process.env.LEASE_BLOCK_MS ?? "300,500,800").split(",").map(Number)) {
      for (const leaseMs of leases) {
        // One job in 100 blocks its process's event loop; one in 50 overruns.
        const r = await throughFaults(proxy, server.url, proxied(server.url, proxy), {}, {
          jobs: 2_000, leaseMs, blockMs, mix: (i) => (i % 100 === 3 ? "block" : i % 50 === 7 ? "overrun" : undefined),
        });
        line(`block ${blockMs} lease ${leaseMs}`, r);
      }
    }
  }, 3_600_000);
});
