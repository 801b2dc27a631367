import type { OracleEvent } from "./oracle.ts";

/**
 * The most handlers of one group (`g`, the fault job's concurrency key) the
 * oracle saw running at one instant. A handler runs from its start to its
 * end; a handler of a SIGKILLed process that never wrote its end ran until
 * that process died (`deathAt`, by pid), or to the end of the run.
 */
export function maxRunningPerGroup(events: readonly OracleEvent[], deathAt: ReadonlyMap<number, number>): number {
  const groupOf = new Map<string, string>();
  const edges: { t: number; g: string; d: 1 | -1 }[] = [];
  const open = new Map<string, { g: string; pid: number }>();
  const key = (e: OracleEvent) => `${e.job}#${e.attempt}#${e.pid}`;
  for (const e of events) {
    if (e.e === "start" && e.g !== undefined) {
      groupOf.set(key(e), e.g);
      open.set(key(e), { g: e.g, pid: e.pid });
      edges.push({ t: e.t, g: e.g, d: 1 });
    } else if (e.e === "end" && groupOf.has(key(e))) {
      open.delete(key(e));
      edges.push({ t: e.t, g: groupOf.get(key(e))!, d: -1 });
    }
  }
  for (const { g, pid } of open.values()) edges.push({ t: deathAt.get(pid) ?? Number.POSITIVE_INFINITY, g, d: -1 });
  // Ends before starts at the same instant: a slot freed and taken at once is not two at once.
  edges.sort((a, b) => a.t - b.t || a.d - b.d);
  const running = new Map<string, number>();
  let max = 0;
  for (const { g, d } of edges) {
    const n = (running.get(g) ?? 0) + d;
    running.set(g, n);
    max = Math.max(max, n);
  }
  return max;
}
