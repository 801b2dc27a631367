import { sql, type Store } from "../db/db.ts";

/**
 * One place where a job's death is described, whichever path killed it: a
 * failure or timeout on its last attempt, a permanent failure, a payload that
 * no longer fits its schema (the runner), or an expired lease (the rescuer).
 * Each writer passes the ids it moved to `dead`; the functions report each
 * once, as a `"job dead"` log line and a `DeadJobs` count for its queue.
 */
export interface DeadJob {
  id: string;
  queue: string;
  name: string;
  attempts: number;
  /** How each attempt ended, in order: "lease_expired: ...", "failed: ...". */
  reasons: string[];
}

const DESCRIBE_DEATHS = `
select j.id::text, j.queue, j.name, j.attempts,
       coalesce((select array_agg(a.outcome || coalesce(': ' || a.error, '') order by a.attempt)
                 from leasehold.job_attempts a where a.job_id = j.id and a.generation = j.generation), '{}') as reasons
from leasehold.jobs j
where j.id = any($1::bigint[]) and j.status = 'dead'
order by j.id`;

/** The dead jobs among `ids`, each with every attempt's reason. */
export async function describeDeaths(store: Store, ids: readonly string[]): Promise<DeadJob[]> {
  if (ids.length === 0) return [];
  const { rows } = await store.db.query<DeadJob>(sql(store.schema, DESCRIBE_DEATHS), [ids]);
  return rows;
}

/** The fields of a job's `"job dead"` log line, the same on every platform. */
export function deathFields(d: DeadJob): Record<string, unknown> {
  return { jobId: d.id, queue: d.queue, name: d.name, attempts: d.attempts, reasons: d.reasons };
}
