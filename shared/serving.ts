/**
 * Which jobs some runner could ever run: its queue must be served by a runner
 * in the config, and its lease must fit that runner's `maxLeaseMs`. Enqueue
 * refuses the rest when it is given these rules (the API and CLI pass the
 * deployment's; the core checks nothing without them).
 */
import type { Config } from "./config.ts";

/** Each served queue with the longest lease any runner serving it allows. */
export type ServingRules = ReadonlyMap<string, number>;

export function servingRules(config: Pick<Config, "runners">): ServingRules {
  const rules = new Map<string, number>();
  for (const runner of Object.values(config.runners)) {
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
