import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import type { Pool } from "../../shared/db/db.ts";
import { enqueueJobs, job } from "../../shared/jobs/enqueue.ts";
import { migrate } from "../../shared/db/migrate.ts";
import { DEFAULT_QUERY_TIMEOUT_MS } from "../../shared/db/drivers/options.ts";
import { rescueExpiredLeases } from "../../shared/lifecycle/rescue.ts";
import { faultJob } from "../fixtures/fault-jobs.ts";
import { checkFaults, readJobRows, type FaultVerdict } from "./fault-checker.ts";
import { maxRunningPerGroup } from "./group-oracle.ts";
import { countEnds, readOracle } from "./oracle.ts";
import { crashed, startFleet, type Fleet, type FleetOptions, type WorkerProcess } from "./worker-fleet.ts";

/**
 * One fault run: a fresh schema with `jobs` jobs, a fleet of worker processes
 * draining it through `workerUrl`, the rescuer called in a loop from here
 * (as EventBridge would), and a fault script running beside them. Ends when
 * every job is terminal or `drainMs` has passed, then stops the fleet and
 * judges the run from the oracle and the database.
 */

export interface FaultRunOptions {
  /** Direct to the server: setup, rescuer, progress, verdict. */
  adminUrl: string;
  /** Where the workers connect (the fault proxy, or direct). */
  workerUrl: string;
  jobs: number;
  fleet: Omit<FleetOptions, "dir" | "databaseUrl" | "schema">;
  drainMs: number;
  rescueEveryMs?: number;
  /** Spread the jobs over this many concurrency keys (`g`, limited by the fault job type); default none. */
  groups?: number;
  /** The faults; `ended()` is how many handlers have ended so far. Should return once `stopped()` is true. */
  faults(ctx: { fleet: Fleet; ended: () => number; stopped: () => boolean }): Promise<void>;
}

export interface FaultRunResult {
  verdict: FaultVerdict;
  drained: boolean;
  durationMs: number;
  crashes: { pid: number; code: number | null; signal: string | null; reason: string }[];
  /** Workers that had to be SIGKILLed after the drain finished: stuck. */
  hung: number[];
  /** Workers SIGKILLed at the end of a drain that did not finish. */
  stoppedWorking: number;
  killed: number[];
  spawned: number;
  rescued: number;
  rescueErrors: number;
  tornLines: number;
  /** With `groups`: the most handlers of one key the oracle saw running at once. */
  maxRunningPerGroup: number;
}

/** A pg pool for the test itself: it must survive its server restarting, so idle errors are expected. */
function sturdyPool(url: string, max: number): Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on("error", () => {});
  return pool as unknown as Pool;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Why a worker died, from its stderr: the uncaught error, or what runWorker threw. */
export function crashReason(stderr: string): string {
  const lines = stderr.split("\n").map((l) => l.trim()).filter(Boolean);
  const threw = lines.find((l) => l.startsWith("runWorker threw"));
  if (threw) return threw;
  const unhandled = lines.findIndex((l) => l.includes("Unhandled 'error' event"));
  const error = lines.slice(Math.max(unhandled, 0)).find((l) => /^\w*[Ee]rror\b/.test(l));
  if (unhandled >= 0) return `Unhandled 'error' event: ${error ?? "?"}`;
  return error ?? lines.at(-1) ?? "(no stderr)";
}

export async function runFaultScenario(o: FaultRunOptions): Promise<FaultRunResult> {
  const schema = `f_${Math.random().toString(16).slice(2, 10)}`;
  const dir = mkdtempSync(join(tmpdir(), "leasehold-faults-"));
  const admin = sturdyPool(o.adminUrl, 3);
  await migrate(admin, schema);
  const store = { db: admin, schema };
  const type = faultJob();
  const payload = (i: number) => (o.groups ? { i, g: `k${i % o.groups}` } : { i });
  const enqueued = (await enqueueJobs(store, Array.from({ length: o.jobs }, (_, i) => job(type, payload(i))))).map((j) => j.id);

  const t0 = Date.now();
  const fleet = startFleet({ ...o.fleet, dir, databaseUrl: o.workerUrl, schema });
  let stopped = false;
  let rescued = 0;
  let rescueErrors = 0;
  const rescuer = (async () => {
    while (!stopped) {
      try {
        rescued += (await rescueExpiredLeases(store)).rescued;
      } catch {
        rescueErrors++;
      }
      await sleep(o.rescueEveryMs ?? 250);
    }
  })();
  const faults = o.faults({ fleet, ended: () => countEnds(fleet.oracles()), stopped: () => stopped });

  let drained = false;
  while (!drained && Date.now() - t0 < o.drainMs) {
    await sleep(250);
    try {
      const { rows } = await admin.query<{ open: number }>(
        `select count(*)::int as open from "${schema}".jobs where status in ('queued', 'running')`,
      );
      drained = rows[0]!.open === 0;
    } catch {
      // the server is restarting
    }
  }
  const durationMs = Date.now() - t0;
  stopped = true;
  await faults;
  // A worker's last writes may each wait out one query timeout on a connection
  // cut under them before they are retried: "stuck" is well beyond that.
  await fleet.stop((o.fleet.idleMs ?? 1_000) + DEFAULT_QUERY_TIMEOUT_MS + 3_000);
  await rescuer;
  // Lost means nothing will ever run it: first let the stopped workers' leases expire and be rescued.
  const { rows: [held] } = await admin.query<{ wait_ms: number | null }>(
    `select (extract(epoch from max(lease_expires_at) - now()) * 1000)::int as wait_ms from "${schema}".jobs where status = 'running'`,
  );
  if (held?.wait_ms != null) {
    await sleep(Math.max(held.wait_ms, 0) + 50);
    rescued += (await rescueExpiredLeases(store)).rescued;
  }

  const { events, torn } = readOracle(fleet.oracles());
  const killed = fleet.processes.filter((p) => p.killed);
  const verdict = checkFaults({
    enqueued, rows: await readJobRows(admin, schema), events, killedPids: new Set(killed.map((p) => p.pid)),
  });
  await admin.query(`drop schema "${schema}" cascade`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
  const crash = (p: WorkerProcess) => ({ pid: p.pid, code: p.exit!.code, signal: p.exit!.signal, reason: crashReason(p.stderr) });
  return {
    verdict, drained, durationMs,
    crashes: fleet.processes.filter(crashed).map(crash),
    // A worker still running after a drain that did not finish may just be working; after one that did, it is stuck.
    hung: drained ? fleet.processes.filter((p) => p.hung).map((p) => p.pid) : [],
    stoppedWorking: drained ? 0 : fleet.processes.filter((p) => p.hung).length,
    killed: killed.map((p) => p.pid),
    spawned: fleet.processes.length,
    rescued, rescueErrors, tornLines: torn,
    maxRunningPerGroup: maxRunningPerGroup(events, new Map(fleet.processes.map((p) => [p.pid, p.exit?.at ?? Number.POSITIVE_INFINITY]))),
  };
}
