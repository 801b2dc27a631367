import { lightRunner } from "../settings/config.ts";
import type { Pool } from "../db/db.ts";
import { reserveRunners, runnersToStart, stopRunner } from "./fleet.ts";
import { claimable } from "../settings/serving.ts";
import { countReadyEach } from "../observe/stats.ts";

/**
 * One scheduler pass, whatever starts the runners (a Lambda invoke, a fetch
 * to a runner Worker): look at demand per runner (ready jobs it can claim:
 * its queues, the job types it knows, leases it allows), reserve the invocations the
 * live runners will not absorb (under the scheduler lock, within each
 * runner's maximum concurrency and the connection budget), then start each.
 * An invocation that could not be started gives its reservation back.
 */

export interface RunnerDemandSpec {
  queues: string[];
  maxLeaseMs: number;
  slots: number;
  maxConcurrency: number;
  /** Its light variant (function `<name>-light`), if it has one: see `planRunners`. */
  light?: { slots: number };
}

export interface PassOptions {
  pool: Pool;
  schema: string;
  /** The runners this scheduler starts, by name. */
  runners: ReadonlyArray<readonly [string, RunnerDemandSpec]>;
  /** The job types the runners were deployed with: only jobs a runner can claim are demand. */
  names: Iterable<string>;
  /** Runner invocations the database connection budget allows in all, live ones (of any scheduler) included. */
  maxRunners: number;
  /** Jobs coming due within this long count as demand (runners started ahead of a due time). */
  horizonMs?: number;
  /** Most invocations this pass may start (e.g. the connections a Worker has left to hold them). */
  maxStarts?: number;
  /**
   * Whether function `name` may be asked for runners now (false while its
   * Invokes back off): one that may not is left out of the plan, reserves
   * nothing, and its ready jobs stay uncovered.
   */
  canStart?: (name: string) => boolean;
  /** Starts runner `name` with reservation `invocationId`; a throw gives the reservation back. */
  invoke: (name: string, invocationId: string) => Promise<void>;
  onInvokeError?: (name: string, err: unknown) => void;
  newId?: () => string;
}

export interface PassResult {
  /** Ready jobs per runner (each count capped). */
  ready: Map<string, number>;
  total: number;
  /** Invocations reserved, started or not. */
  reserved: number;
  /** Invocations started per runner. */
  invoked: Map<string, number>;
  /**
   * Every ready job is in the hands of runners this pass started, with none
   * live before it: each will claim at least once after its start, so
   * nothing ready needs watching (a runner that fails reaches the scheduler
   * through its on-failure destination). False when a live runner was
   * counted on (it may be on its way out) or a runner was short.
   */
  covered: boolean;
}

export async function schedulePass(o: PassOptions): Promise<PassResult> {
  const store = { db: o.pool, schema: o.schema };
  const newId = o.newId ?? (() => crypto.randomUUID());
  const names = [...o.names];
  // Each runner's demand, capped at what its fleet could take, all in one statement.
  const ready = await countReadyEach(store, names, o.runners.map(([name, r]) => ({
    key: name, maxLeaseMs: claimable({ runners: { [name]: r } }, names).maxLeaseMs, cap: r.slots * r.maxConcurrency + 1,
  })), o.horizonMs);
  const total = [...ready.values()].reduce((a, b) => a + b, 0);
  const invoked = new Map<string, number>();
  if (total === 0) return { ready, total, reserved: 0, invoked, covered: false };
  let liveBefore = 0;

  const decided = await reserveRunners(o.pool, o.schema, (live) => {
    const liveOf = (name: string) => (live.get(name) ?? 0) + (live.get(lightRunner(name)) ?? 0);
    liveBefore = o.runners.reduce((n, [name]) => n + ((ready.get(name) ?? 0) > 0 ? liveOf(name) : 0), 0);
    let budget = Math.min(o.maxRunners - [...live.values()].reduce((a, b) => a + b, 0), o.maxStarts ?? Number.POSITIVE_INFINITY);
    const plan = new Map<string, string[]>();
    for (const [name, r] of o.runners) {
      for (const [fn, n] of planRunners(name, r, ready.get(name) ?? 0, live, budget)) {
        if (n > 0 && o.canStart && !o.canStart(fn)) continue;
        budget -= n;
        plan.set(fn, Array.from({ length: n }, newId));
      }
    }
    return plan;
  });

  await Promise.all(
    [...decided].flatMap(([name, ids]) =>
      ids.map(async (id) => {
        try {
          await o.invoke(name, id);
          invoked.set(name, (invoked.get(name) ?? 0) + 1);
        } catch (err) {
          o.onInvokeError?.(name, err);
          await stopRunner(store, id).catch(() => {});
        }
      }),
    ),
  );
  const covered = liveBefore === 0 && o.runners.every(([name, r]) =>
    (ready.get(name) ?? 0) <= (invoked.get(name) ?? 0) * r.slots + (invoked.get(lightRunner(name)) ?? 0) * (r.light?.slots ?? 0));
  return { ready, total, reserved: [...decided.values()].reduce((n, ids) => n + ids.length, 0), invoked, covered };
}

/**
 * Which functions of runner `name` to start, and how many: memory follows
 * the work. With no runner of it live and ready jobs its light variant's
 * slots hold (an isolated job, a trickle), one light runner; otherwise full
 * runners for what the live ones (light ones at their own slots) will not
 * absorb, within its maximum concurrency (light ones count against it) and
 * the budget.
 */
export function planRunners(
  name: string, r: RunnerDemandSpec, ready: number, live: ReadonlyMap<string, number>, budget: number,
): [string, number][] {
  const liveFull = live.get(name) ?? 0;
  const liveLight = r.light ? (live.get(lightRunner(name)) ?? 0) : 0;
  if (r.light && liveFull + liveLight === 0 && ready > 0 && ready <= r.light.slots && budget > 0) return [[lightRunner(name), 1]];
  const n = runnersToStart({
    ready: Math.max(0, ready - liveLight * (r.light?.slots ?? 0)), live: liveFull, slots: r.slots,
    maxConcurrency: Math.max(0, r.maxConcurrency - liveLight), budget,
  });
  return [[name, n]];
}
