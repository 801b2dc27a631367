/**
 * Which jobs some runner could ever run: its queue must be served by a runner
 * in the config (Lambda or edge), its lease must fit that runner's `maxLeaseMs`, and its type
 * must be in the runners' registry. Enqueue refuses the rest when it is given
 * these rules (the API and CLI pass the deployment's; the core checks nothing
 * without them); a job that gets in anyway (written by a newer deploy) is
 * counted `unserved` and never claimed.
 */
import type { RunnerConfig } from "./config.ts";

type Served = Readonly<Record<string, Pick<RunnerConfig, "queues" | "maxLeaseMs">>>;

/** The runners as serving sees them (Lambda and edge): the queues each serves and the longest lease each allows. */
export type Runners = { runners: Served; edge?: { runners: Served } };

/** Each served queue with the longest lease any runner serving it allows. */
export type ServingRules = ReadonlyMap<string, number>;

export function servingRules(config: Runners): ServingRules {
  const rules = new Map<string, number>();
  for (const runner of [...Object.values(config.runners), ...Object.values(config.edge?.runners ?? {})]) {
    for (const queue of runner.queues) rules.set(queue, Math.max(rules.get(queue) ?? 0, runner.maxLeaseMs));
  }
  return rules;
}

/** Why no runner could run a job on `queue` with a lease of `leaseMs`, or null when one could. */
export function servingProblem(rules: ServingRules, queue: string, leaseMs: number): { field: "queue" | "leaseMs"; message: string } | null {
  const maxLeaseMs = rules.get(queue);
  if (maxLeaseMs === undefined) {
    const served = [...rules.keys()].map((q) => JSON.stringify(q)).join(", ");
    return { field: "queue", message: `no runner serves queue ${JSON.stringify(queue)} (served: ${served})` };
  }
  if (leaseMs > maxLeaseMs) {
    return { field: "leaseMs", message: `a ${leaseMs}ms lease is longer than the ${maxLeaseMs}ms (maxLeaseMs) the runner serving queue ${JSON.stringify(queue)} allows` };
  }
  return null;
}

/**
 * What runners can claim: the job types they know (the registry they were
 * deployed with) and, per queue served, the longest lease allowed. A ready
 * job outside it waits uncharged and is counted `unserved`.
 */
export interface Claimable {
  names: readonly string[];
  /** Served queues, each with its longest claimable lease. */
  maxLeaseMs: ServingRules;
}

/**
 * What the runners of `config` (all of them, or one: `{ runners: { name: r } }`)
 * can claim, knowing the job types `names`.
 */
export function claimable(config: Runners, names: Iterable<string>): Claimable {
  return { names: [...names], maxLeaseMs: servingRules(config) };
}
