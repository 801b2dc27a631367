import { backlogPhase } from "./backlog.ts";
import { budgetPhase } from "./budget.ts";
import { bundlePhase } from "./bundle.ts";
import { edgePhase } from "./edge.ts";
import { fairTenantsPhases } from "./fair-tenants.ts";
import type { LibId } from "./lib.ts";
import { scaleOutPhase } from "./scale-out.ts";
import { shapePhases } from "./shapes.ts";
import { stepsChainPhase } from "./steps-chain.ts";
import { ungroupedClaimPhase } from "./ungrouped-claim.ts";
import { batchThenExecute, enqueueOneByOne, hopChain, type Phase, type Sizes } from "./phases.ts";

/** Workload sizes: the full run, and `--quick` (one run, smaller counts, no 1M backlog). */
export const FULL_SIZES: Sizes = { batch: 10_000, seq: 1_000, hop: 200, slots: 20, scaleOut: 40_000 };
export const QUICK_SIZES: Sizes = { batch: 5_000, seq: 500, hop: 100, slots: 20, scaleOut: 8_000 };

const ALL: readonly LibId[] = ["leasehold", "graphile", "pgboss"];

/**
 * The phases of a run, in order. Phases with the same library list are
 * compared side by side; Leasehold-only phases are Leasehold's own figures.
 * Add a scenario (workflow, tenants, OOM ...) by appending a Phase here.
 */
export function defaultPlan(quick: boolean): Phase[] {
  return [
    enqueueOneByOne("enqueue-one-by-one", false, ALL),
    batchThenExecute("batch-execute", false, ALL),
    hopChain("hop", false, ALL),
    scaleOutPhase(ALL),
    ...shapePhases,
    enqueueOneByOne("net-enqueue-one-by-one", true, ALL),
    batchThenExecute("net-batch-execute", true, ALL),
    hopChain("net-hop", true, ALL),
    backlogPhase("later", 10_000, "10k"),
    backlogPhase("later", 100_000, "100k"),
    ...(quick ? [] : [backlogPhase("later", 1_000_000, "1m")]),
    backlogPhase("lower", quick ? 100_000 : 1_000_000, quick ? "100k" : "1m"),
    backlogPhase("ahead", quick ? 10_000 : 100_000, quick ? "10k" : "100k"),
    ...fairTenantsPhases,
    ungroupedClaimPhase,
    stepsChainPhase,
    bundlePhase,
    edgePhase,
    budgetPhase(ALL),
  ];
}
