import { getJob } from "../../shared/observe/admin.ts";
import type { JobStatus } from "../../shared/jobs/job.ts";
import { CliError, EXIT } from "../errors.ts";
import type { Context } from "../context.ts";

export function notFound(id: string): CliError {
  return new CliError(EXIT.notFound, `job ${id} does not exist`, "not_found", { id });
}

/** Why a guarded state change changed nothing: the job is missing (3) or in another state (4). */
export async function refusal(ctx: Context, id: string, needed: JobStatus, action: string): Promise<CliError> {
  const job = await getJob(ctx.store(), id);
  if (!job) return notFound(id);
  return new CliError(EXIT.conflict, `job ${id} is ${job.status}; only a ${needed} job can be ${action}`, "conflict", {
    id,
    status: job.status,
  });
}
