import { registry as bundledRegistry } from "../jobs/index.ts";
import type { Registry } from "../shared/job.ts";

/**
 * The job types the functions were deployed with: the app's (jobs/index.ts),
 * or, in local development and tests, the module named by LEASEHOLD_JOBS.
 * Runners claim only these; the scheduler counts only these as demand; the
 * rescuer counts the rest as unserved.
 */
export let registry: Registry = bundledRegistry;
if (process.env.LEASEHOLD_JOBS) {
  registry = ((await import(process.env.LEASEHOLD_JOBS)) as { registry: Registry }).registry;
}
