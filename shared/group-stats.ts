import { sql, type Store } from "./db.ts";

/** One group of one queue, as the fair claim shares it. */
export interface GroupStats {
  queue: string;
  /** The share's group; null for ungrouped jobs (and job types that opt out of fairness). */
  group: string | null;
  /** Queued and due now. */
  ready: number;
  running: number;
  /** The concurrency limit its jobs carry (the largest, if they differ); null when none has one. */
  limit: number | null;
}

/** The cap on groups listed; the busiest come first. */
export const MAX_GROUPS_LISTED = 500;

// Reads the queued and running jobs only, as queueStats does; the busiest
// groups first, so the cap keeps the ones an operator looks for.
const GROUP_STATS = `
select queue, nullif(fair_group, '') as "group",
       count(*) filter (where status = 'queued' and run_at <= now())::integer as ready,
       count(*) filter (where status = 'running')::integer as running,
       max(concurrency_limit) as "limit"
from leasehold.jobs
where status in ('queued', 'running') and ($1::text is null or queue = $1::text)
group by queue, fair_group
order by count(*) desc, queue, fair_group
limit $2::integer`;

/** Per queue and group: ready and running jobs and the concurrency limit, busiest first. */
export async function groupStats(store: Store, options: { queue?: string; limit?: number } = {}): Promise<GroupStats[]> {
  const limit = Math.min(Math.max(options.limit ?? MAX_GROUPS_LISTED, 1), MAX_GROUPS_LISTED);
  const { rows } = await store.db.query<GroupStats>(sql(store.schema, GROUP_STATS), [options.queue ?? null, limit]);
  return rows;
}
