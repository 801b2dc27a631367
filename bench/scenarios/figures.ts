/** The figures the scenarios report, computed from their rows and the runtime's accounting. */
import { type Config } from "../../shared/settings/config.ts";
import { functionSpecs, runnerFunctions } from "../../shared/settings/function-specs.ts";
import type { FunctionStats } from "../../dev/lambda/pool.ts";
import { percentile, round } from "../stats.ts";
import type { JobTimeline } from "./harness.ts";

export { percentile, round };

export interface Dist {
  n: number;
  p50: number | null;
  p95: number | null;
  max: number | null;
}

/** p50, p95 and max, in seconds, of values given in ms. */
export function dist(valuesMs: readonly number[]): Dist {
  const s = (x: number | null) => (x === null ? null : round(x / 1000, 3));
  return {
    n: valuesMs.length,
    p50: s(percentile(valuesMs, 50)),
    p95: s(percentile(valuesMs, 95)),
    max: s(valuesMs.length ? Math.max(...valuesMs) : null),
  };
}

/** Largest gap between consecutive values (ms), with where it began. */
export function longestGap(sortedMs: readonly number[]): { gapMs: number; fromMs: number } {
  let best = { gapMs: 0, fromMs: sortedMs[0] ?? 0 };
  for (let i = 1; i < sortedMs.length; i++) {
    const gap = sortedMs[i]! - sortedMs[i - 1]!;
    if (gap > best.gapMs) best = { gapMs: gap, fromMs: sortedMs[i - 1]! };
  }
  return best;
}

/** Lambda accounting of the runners and the scheduler between two snapshots. */
export interface LambdaUse {
  byFunction: Record<string, { invocations: number; coldStarts: number; billedMs: number; gbSeconds: number; initMs: number; kills: number; outOfMemory: number; peakConcurrency: number }>;
  /** Runners + scheduler. */
  invocations: number;
  gbSeconds: number;
  /** GB-s of init (cold starts), which Lambda bills too since 1 Aug 2025; not in gbSeconds. */
  initGbSeconds: number;
}

export function lambdaUse(config: Config, before: Record<string, FunctionStats>, after: Record<string, FunctionStats>): LambdaUse {
  const memory = Object.fromEntries(functionSpecs(config).map((f) => [f.name, f.memoryMb]));
  const byFunction: LambdaUse["byFunction"] = {};
  let invocations = 0;
  let gbSeconds = 0;
  let initGbSeconds = 0;
  const counted = new Set([...runnerFunctions(config).map((f) => f.name), "scheduler"]);
  for (const [fn, a] of Object.entries(after)) {
    const b = before[fn];
    const d = {
      invocations: a.invocations - (b?.invocations ?? 0),
      coldStarts: a.coldStarts - (b?.coldStarts ?? 0),
      billedMs: a.billedMs - (b?.billedMs ?? 0),
      gbSeconds: round(a.gbSeconds - (b?.gbSeconds ?? 0), 3),
      initMs: round(a.initMs - (b?.initMs ?? 0), 0),
      kills: a.kills - (b?.kills ?? 0),
      outOfMemory: a.outOfMemory - (b?.outOfMemory ?? 0),
      peakConcurrency: a.peakConcurrency,
    };
    if (d.invocations === 0) continue;
    byFunction[fn] = d;
    if (counted.has(fn)) {
      invocations += d.invocations;
      gbSeconds += d.gbSeconds;
      initGbSeconds += (d.initMs / 1000) * ((memory[fn] ?? 0) / 1024);
    }
  }
  return { byFunction, invocations, gbSeconds: round(gbSeconds, 3), initGbSeconds: round(initGbSeconds, 3) };
}

/** Jobs whose handler started more than once, and jobs the killed runners held (lease_expired under their ids). */
export function duplicatesAndHeld(jobs: readonly JobTimeline[], killedRunnerIds: ReadonlySet<string>) {
  const duplicated = jobs.filter((j) => j.starts.length > 1);
  const held = jobs.filter((j) => j.attemptRows.some((a) => a.outcome === "lease_expired" && a.runnerId !== null && killedRunnerIds.has(a.runnerId)));
  const heldStarted = jobs.filter((j) =>
    j.attemptRows.some((a) => a.outcome === "lease_expired" && a.runnerId !== null && killedRunnerIds.has(a.runnerId) &&
      j.starts.some((s) => s.attempt === a.attempt && s.runnerId === a.runnerId)));
  // A second run is excused only by an earlier start in a killed runner (charged lease_expired, or given back
  // when the kill came before the start was recorded): any earlier start elsewhere is a duplicate beyond them.
  const beyondKilled = duplicated.filter((j) => j.starts.slice(0, -1).some((s) => s.runnerId === null || !killedRunnerIds.has(s.runnerId)));
  return {
    duplicated: duplicated.length, held: held.length, heldStarted: heldStarted.length, duplicatedIds: duplicated.map((j) => j.id),
    duplicatedBeyondKilledIds: beyondKilled.map((j) => j.id),
  };
}
