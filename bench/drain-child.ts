import { createInterface } from "node:readline";
import { peakRssMiB } from "./child-io.ts";
import { now, round } from "./stats.ts";

/**
 * The child side of a drain (the scale-out phase): several worker processes
 * drain one queue together, started at the same instant. The child loads its
 * library, prints `READY`, and starts its worker on `GO` from stdin; it
 * prints `P <handler calls>` as they grow (every 10 ms at most), and on
 * `STOP` stops its worker and prints `RESULT {json}`.
 */

export interface DrainResult {
  handler_calls: number;
  /** From GO to the worker's start call returning. */
  startup_ms: number;
  peak_rss_mib: number;
  /** The process's CPU (user + system) from GO to STOP, ms. */
  cpu_ms: number;
  /** With `stamp`: each job's index and the epoch ms its handler started, as pairs `[i, ms, i, ms, …]`. */
  starts?: number[];
}

/** Milliseconds since the epoch, sub-millisecond: comparable between the driver and its children. */
export const epochMs = () => performance.timeOrigin + performance.now();

/**
 * `start` starts the worker, calling `hit(i)` as each handler starts (job `i`
 * of the payload), and returns how to stop it. With `stamp`, each start's
 * time is kept for the result.
 */
export async function drainChild(start: (hit: (i?: number) => void) => Promise<() => Promise<unknown>>, stamp = false): Promise<DrainResult> {
  const lines = createInterface({ input: process.stdin });
  const next = (word: string) => new Promise<void>((resolve) => {
    const on = (line: string) => {
      if (line.trim() === word) {
        lines.off("line", on);
        resolve();
      }
    };
    lines.on("line", on);
  });
  let calls = 0;
  let reported = 0;
  const starts: number[] = [];
  const go = next("GO");
  process.stdout.write("READY\n");
  await go;
  const t0 = now();
  const cpu0 = process.cpuUsage();
  const stop = await start((i) => {
    calls++;
    if (stamp) starts.push(i ?? -1, epochMs());
  });
  const startupMs = now() - t0;
  const progress = setInterval(() => {
    if (calls !== reported) process.stdout.write(`P ${(reported = calls)}\n`);
  }, 10);
  await next("STOP");
  const cpu = process.cpuUsage(cpu0);
  clearInterval(progress);
  await stop();
  lines.close();
  return { handler_calls: calls, startup_ms: round(startupMs, 1), peak_rss_mib: peakRssMiB(), cpu_ms: round((cpu.user + cpu.system) / 1000, 1), ...(stamp ? { starts } : {}) };
}
