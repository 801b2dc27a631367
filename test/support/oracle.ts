import { appendFileSync, existsSync, readFileSync } from "node:fs";

/**
 * The oracle: what handlers actually did, as the worker processes saw it,
 * independent of what the database says. Each worker appends one JSON line
 * per event to its own file with appendFileSync (one write per line), so a
 * SIGKILL loses nothing already written and tears at most the line being
 * written. Times are ms since the epoch from performance.timeOrigin + now():
 * comparable across processes of one host.
 */

interface Base {
  job: string;
  attempt: number;
  pid: number;
  t: number;
}

export type OracleEvent =
  /** The handler was entered. */
  | (Base & { e: "start"; g?: string })
  /** The handler returned; `ok` false when its AbortSignal had fired first. */
  | (Base & { e: "end"; ok: boolean })
  /** The runner's settle of this attempt was written (`accepted`) or refused by fencing. */
  | (Base & { e: "settled"; outcome: string; accepted: boolean });

export const oracleClock = () => performance.timeOrigin + performance.now();

export function oracleWriter(file: string): (event: OracleEvent) => void {
  return (event) => appendFileSync(file, `${JSON.stringify(event)}\n`);
}

/** Every event of `files`, in time order, and how many torn lines were skipped. */
export function readOracle(files: readonly string[]): { events: OracleEvent[]; torn: number } {
  const events: OracleEvent[] = [];
  let torn = 0;
  for (const file of files) {
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, "utf8").split("\n")) {
      if (!line) continue;
      try {
        events.push(JSON.parse(line) as OracleEvent);
      } catch {
        torn++;
      }
    }
  }
  events.sort((a, b) => a.t - b.t);
  return { events, torn };
}

/** Handler ends recorded so far in `files` (a cheap progress count for a running test). */
export function countEnds(files: readonly string[]): number {
  let n = 0;
  for (const file of files) {
    if (!existsSync(file)) continue;
    const text = readFileSync(file, "utf8");
    for (let at = text.indexOf('"e":"end"'); at >= 0; at = text.indexOf('"e":"end"', at + 1)) n++;
  }
  return n;
}
