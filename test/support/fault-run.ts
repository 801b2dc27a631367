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
import { countEnds, readOracle, type OracleEvent } from "./oracle.ts";
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
  /** The job type's lease; default FAULT_LEASE_MS (2 s). */
  leaseMs?: number;
  /** The workers' driver query timeout; default 1 s (the driver's own default is 5 s). */
  queryTimeoutMs?: number;
  /** What job `i` does besides its short sleep (test/fixtures/fault-jobs.ts); `block` blocks for `blockMs`. */
  mix?: (i: number) => "overrun" | "block" | undefined;
  blockMs?: number;
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
  /** Recorded attempt outcomes (the attempts view), by what the job did (`x`: plain, overrun, block). */
  outcomes: Record<string, Record<string, number>>;
  /** From a handler's end to its settle's answer (accepted or refused), per the oracle: ms. */
  settleMs: { n: number; p50: number; p99: number; max: number };
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
  const type = faultJob(undefined, o.leaseMs);
  const payload = (i: number) => ({ i, ...(o.groups ? { g: `k${i % o.groups}` } : {}), ...(o.mix?.(i) ? { x: o.mix(i) } : {}) });
  const enqueued = (await enqueueJobs(store, Array.from({ length: o.jobs }, (_, i) => job(type, payload(i))))).map((j) => j.id);

  const t0 = Date.now();
  const env = {
    ...(o.leaseMs ? { FAULT_LEASE_MS: String(o.leaseMs) } : {}),
    ...(o.queryTimeoutMs ? { FAULT_QUERY_TIMEOUT_MS: String(o.queryTimeoutMs) } : {}),
    ...(o.blockMs ? { FAULT_BLOCK_MS: String(o.blockMs) } : {}),
  };
  const fleet = startFleet({ ...o.fleet, dir, databaseUrl: o.workerUrl, schema, env: { ...o.fleet.env, ...env } });
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
  await fleet.stop((o.fleet.idleMs ?? 1_000) + (o.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS) + 3_000);
  await rescuer;
  // Lost means nothing will ever run it: first let the stopped workers' leases expire and be rescued.
  const { rows: [held] } = await admin.query<{ wait_ms: number | null }>(
    `select (extract(epoch from max(lease_expires_at) - now()) * 1000)::int as wait_ms from "${schema}".jobs where status = 'running'`,
  );
  if (held?.wait_ms != null) {
    await sleep(Math.max(held.wait_ms, 0) + 50);
    rescued += (await rescueExpiredLeases(store)).rescued;
  }

  // FAULT_STDERR=1 prints each worker's stderr (its warnings: stale settles, write errors), to see why a run went wrong.
  if (process.env.FAULT_STDERR) for (const p of fleet.processes) console.log("STDERR", p.pid, p.stderr.split("\n").map((l) => l.slice(0, 200)).join("\n"));
  const { events, torn } = readOracle(fleet.oracles());
  const killed = fleet.processes.filter((p) => p.killed);
  const verdict = checkFaults({
    enqueued, rows: await readJobRows(admin, schema), events, killedPids: new Set(killed.map((p) => p.pid)),
  });
  const outcomes = await outcomesByMix(admin, schema);
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
    outcomes, settleMs: settleLatency(events),
    maxRunningPerGroup: maxRunningPerGroup(events, new Map(fleet.processes.map((p) => [p.pid, p.exit?.at ?? Number.POSITIVE_INFINITY]))),
  };
}

async function outcomesByMix(admin: Pool, schema: string): Promise<Record<string, Record<string, number>>> {
  const { rows } = await admin.query<{ x: string; outcome: string; n: number }>(
    `select coalesce(j.payload->>'x', 'plain') as x, a.outcome::text, count(*)::int as n
     from "${schema}".attempts a join "${schema}".jobs j on j.id = a.job_id group by 1, 2`,
  );
  const out: Record<string, Record<string, number>> = {};
  for (const r of rows) (out[r.x] ??= {})[r.outcome] = r.n;
  return out;
}

/** Handler end to settle answer, per attempt and process, from the oracle. */
export function settleLatency(events: readonly OracleEvent[]): FaultRunResult["settleMs"] {
  const ends = new Map<string, number>();
  for (const e of events) if (e.e === "end") ends.set(`${e.job}/${e.attempt}/${e.pid}`, e.t);
  const ms = events.flatMap((e) => {
    const end = e.e === "settled" ? ends.get(`${e.job}/${e.attempt}/${e.pid}`) : undefined;
    return end === undefined ? [] : [e.t - end];
  }).sort((a, b) => a - b);
  const at = (q: number) => Math.round(ms[Math.min(ms.length - 1, Math.floor(q * ms.length))] ?? 0);
  return { n: ms.length, p50: at(0.5), p99: at(0.99), max: at(1) };
}
