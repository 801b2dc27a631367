import { runFaultScenario, type FaultRunOptions, type FaultRunResult } from "./fault-run.ts";
import type { FaultProxy } from "./fault-proxy.ts";

/** Short leases through a faulty network: shared by test/lease-faults.test.ts and test/measure-lease.ts. */

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
// Two runner processes, not the four of test/faults.test.ts: on a two-core host four of them (with Postgres, the
// proxy and vitest) starve each other of CPU for up to a second, which no lease of 1 s survives (the measurements
// run both).
export const FLEET = { size: Number(process.env.LEASE_FLEET ?? "2"), slots: 10, poolSize: 4, idleMs: 1_000 };

export function summary(r: FaultRunResult) {
  const v = r.verdict;
  return {
    durationMs: r.durationMs, drained: r.drained, crashes: r.crashes.length, hung: r.hung.length, byStatus: v.byStatus,
    lost: v.lost.length, rerunAfterSuccess: v.rerunAfterSuccess.length, chargedNeverStarted: v.chargedNeverStarted.length,
    outcomes: r.outcomes, settleMs: r.settleMs, rescued: r.rescued,
  };
}

/** Runs one scenario through `proxy` with cuts and stalls as asked. */
export async function throughFaults(
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

export function proxied(url: string, proxy: FaultProxy): string {
  const u = new URL(url);
  u.hostname = proxy.host;
  u.port = String(proxy.port);
  return u.toString();
}

