import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import type { ChildArgs } from "./child-io.ts";
import { spawnWorkerChild, type ChildLib } from "./children.ts";
import type { DrainResult } from "./drain-child.ts";

/**
 * The driver side of a drain (bench/drain-child.ts): `count` worker children
 * of one library, all loaded before any starts, started together by `go()`.
 * `calls()` sums their handler runs as they report them.
 */

export interface DrainFleet {
  go(): void;
  calls(): number;
  /** Stops every worker and returns each child's result. */
  stop(): Promise<DrainResult[]>;
}

export async function startDrainFleet(lib: ChildLib, count: number, args: ChildArgs, timeoutMs = 600_000): Promise<DrainFleet> {
  const children: ChildProcess[] = [];
  const progress: number[] = new Array(count).fill(0);
  const results: Promise<DrainResult>[] = [];
  const ready: Promise<void>[] = [];
  for (let k = 0; k < count; k++) {
    const child = await spawnWorkerChild(lib, "drain", args, true);
    children.push(child);
    let result: DrainResult | null = null;
    let onReady!: () => void;
    ready.push(new Promise((r) => (onReady = r)));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      if (line === "READY") onReady();
      else if (line.startsWith("P ")) progress[k] = Number(line.slice(2));
      else if (line.startsWith("RESULT ")) result = JSON.parse(line.slice(7)) as DrainResult;
    });
    results.push(new Promise((resolve, reject) => {
      const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
      child.on("exit", (code, signal) => {
        clearTimeout(timer);
        if (code === 0 && result) resolve(result);
        else reject(new Error(`${lib} drain child ${k}: exit ${code ?? signal}${result ? "" : ", no RESULT"}`));
      });
    }));
    // A child that dies before READY must not leave the driver waiting.
    results[k]!.catch(() => onReady());
  }
  await Promise.all(ready);
  return {
    go: () => children.forEach((c) => c.stdin!.write("GO\n")),
    calls: () => progress.reduce((a, b) => a + b, 0),
    stop: () => {
      children.forEach((c) => c.stdin!.write("STOP\n"));
      return Promise.all(results);
    },
  };
}
