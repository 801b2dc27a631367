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
}

/** `start` starts the worker, calling `hit()` once per handler run, and returns how to stop it. */
export async function drainChild(start: (hit: () => void) => Promise<() => Promise<unknown>>): Promise<DrainResult> {
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
  const go = next("GO");
  process.stdout.write("READY\n");
  await go;
  const t0 = now();
  const cpu0 = process.cpuUsage();
  const stop = await start(() => calls++);
  const startupMs = now() - t0;
  const progress = setInterval(() => {
    if (calls !== reported) process.stdout.write(`P ${(reported = calls)}\n`);
  }, 10);
  await next("STOP");
  const cpu = process.cpuUsage(cpu0);
  clearInterval(progress);
  await stop();
  lines.close();
  return { handler_calls: calls, startup_ms: round(startupMs, 1), peak_rss_mib: peakRssMiB(), cpu_ms: round((cpu.user + cpu.system) / 1000, 1) };
}
