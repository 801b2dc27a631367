/**
 * The edge Worker the benchmark runs in workerd: functions/edge/worker.ts
 * with one no-op job type, the same type the Node runner beside it runs.
 */
import * as z from "zod";
import { createEdgeWorker } from "../functions/edge/worker.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";

export const edgeBenchType = defineJob({ name: "bench.edge", schema: z.object({ i: z.number().int() }), handler: () => {} });
export const edgeBenchRegistry = createRegistry([edgeBenchType]);

export default createEdgeWorker({ registry: edgeBenchRegistry });
