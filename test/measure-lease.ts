import { startEmbeddedPostgres } from "../dev/embedded-postgres.ts";
import { startFaultProxy } from "./support/fault-proxy.ts";
import { runFaultScenario, type FaultRunResult } from "./support/fault-run.ts";
import { FLEET, proxied, sleep, summary, throughFaults } from "./support/lease-faults.ts";

/**
 * The measurements behind docs/internals.md ("The minimum lease", "Known
 * limits, measured"), on an embedded Postgres of their own: settle latency
 * under cuts, stalls and a restart, repeated runs, and what a blocking
 * handler costs its neighbours. One MEASURE line per run.
 *
 *   npx tsx test/measure-lease.ts   (LEASE_REPS, LEASE_MS=1000,2000, LEASE_BLOCK_MS=300,500,800, LEASE_FLEET)
 */

const server = await startEmbeddedPostgres();
const target = new URL(server.url);
const proxy = await startFaultProxy({ target: { host: target.hostname, port: Number(target.port || 5432) } });
const reps = Number(process.env.LEASE_REPS ?? "3");
const leases = (process.env.LEASE_MS ?? "1000").split(",").map(Number);
const line = (what: string, r: FaultRunResult) => console.log(`MEASURE ${JSON.stringify({ what, ...summary(r) })}`);

/** Settle latency under cuts, stalls and restarts, in repeated runs. */
async function settleLatency(): Promise<void> {
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
}

/** What one blocking handler costs its neighbours: one job in 100 blocks its process's event loop; one in 50 overruns. */
async function blockingCost(): Promise<void> {
  for (const blockMs of (process.env.LEASE_BLOCK_MS ?? "300,500,800").split(",").map(Number)) {
    for (const leaseMs of leases) {
      const r = await throughFaults(proxy, server.url, proxied(server.url, proxy), {}, {
        jobs: 2_000, leaseMs, blockMs, mix: (i) => (i % 100 === 3 ? "block" : i % 50 === 7 ? "overrun" : undefined),
      });
      line(`block ${blockMs} lease ${leaseMs}`, r);
    }
  }
}

try {
  await settleLatency();
  await blockingCost();
} finally {
  await proxy.close();
  await server.stop();
}
