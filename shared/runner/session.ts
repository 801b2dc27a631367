import type { Store } from "../db/db.ts";
import { describeDeaths, type DeadJob } from "../observe/deaths.ts";
import { HEARTBEAT_MS, renewRunner, startRunner, stopRunner } from "../scheduler/fleet.ts";
import { runWorker, type WorkerLog, type WorkerOptions, type WorkerSummary } from "./worker.ts";

/**
 * One runner invocation around the loop, on any runtime: it announces itself
 * in the fleet, keeps its heartbeat while it could still take a job of the
 * longest lease its queues allow (after that, or if it dies, schedulers stop
 * counting it), runs `runWorker`, describes and reports each death as it
 * happens (a runner that dies next loses none), and leaves the fleet.
 * The Lambda runner and the edge runner are thin adapters over this.
 */
export interface SessionOptions extends Omit<WorkerOptions, "onDead" | "log" | "marginMs"> {
  store: Store;
  /** The scheduler's reservation id for this invocation. */
  invocationId: string;
  /** The runner's name in the config. */
  runner: string;
  /** The platform's request id. */
  requestId: string;
  /** Longest lease this runner's queues allow. */
  maxLeaseMs: number;
  marginMs: number;
  remainingMs: () => number;
  log: WorkerLog;
  /** Reports dead jobs: the "job dead" lines and whatever the platform counts. */
  reportDeaths: (deaths: DeadJob[]) => void;
}

export async function runSession(o: SessionOptions): Promise<WorkerSummary> {
  const { store, invocationId, log } = o;
  let deaths: Promise<void> = Promise.resolve();
  const heartbeat = setInterval(() => {
    const retiring = o.remainingMs() - o.marginMs < o.maxLeaseMs;
    if (retiring) clearInterval(heartbeat);
    (retiring ? stopRunner(store, invocationId) : renewRunner(store, invocationId)).catch((err) =>
      log.warn("runner heartbeat failed", { error: String(err) }),
    );
  }, HEARTBEAT_MS);
  try {
    // Announcing itself is best effort: the heartbeat retries, and the loop
    // below rides out (or cleanly gives up on) a database that is not there.
    await startRunner(store, { id: invocationId, runner: o.runner, requestId: o.requestId }).catch((err) =>
      log.warn("could not announce runner", { error: String(err) }));
    return await runWorker({
      ...o,
      onDead: (ids) => {
        deaths = deaths.then(() => describeDeaths(store, ids)).then(o.reportDeaths, (err) =>
          log.error("could not describe dead jobs", { jobIds: ids, error: String(err) }));
      },
    });
  } finally {
    await deaths;
    clearInterval(heartbeat);
    await stopRunner(store, invocationId).catch((err) => log.warn("could not deregister runner", { error: String(err) }));
  }
}
