import type { Pool } from "../../shared/db/db.ts";

/**
 * Reading a scenario's rows back (bench/scenarios/harness.ts runs it): each
 * job's timeline from its row, its attempt rows and the handler's start and
 * finish events, the status counts, the wait for a drain, and the
 * database's clock.
 */

/** What reading needs of a running scenario stack: its pool and schema. */
export interface ScenarioRows {
  pool: Pool;
  schema: string;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface AttemptRow {
  attempt: number;
  runnerId: string | null;
  claimedAt: number;
  endedAt: number;
  outcome: string;
  error: string | null;
}

export interface JobTimeline {
  id: string;
  name: string;
  queue: string;
  status: string;
  group: string | null;
  payload: Record<string, unknown>;
  attempts: number;
  /** Epoch ms, database clock. */
  createdAt: number;
  runAt: number;
  /** Handler starts and finishes, in order (epoch ms, database clock). */
  starts: { at: number; attempt: number; runnerId: string | null }[];
  finishes: number[];
  attemptRows: AttemptRow[];
}

const TIMELINE = `
select j.id::text, j.name, j.queue, j.status::text, j.group_key, j.payload, j.attempts,
       extract(epoch from j.created_at) * 1000 as created_ms, extract(epoch from j.run_at) * 1000 as run_ms,
       coalesce((select json_agg(json_build_object('at', extract(epoch from e.at) * 1000, 'attempt', e.attempt, 'runnerId', e.runner_id) order by e.at)
                 from "SCHEMA".scenario_events e where e.job_id = j.id and e.kind = 'start'), '[]') as starts,
       coalesce((select json_agg(extract(epoch from e.at) * 1000 order by e.at)
                 from "SCHEMA".scenario_events e where e.job_id = j.id and e.kind = 'finish'), '[]') as finishes,
       coalesce((select json_agg(json_build_object('attempt', a.attempt, 'runnerId', a.runner_id,
                   'claimedAt', extract(epoch from a.claimed_at) * 1000, 'endedAt', extract(epoch from a.ended_at) * 1000,
                   'outcome', a.outcome, 'error', a.error) order by a.ended_at, a.attempt)
                 from "SCHEMA".attempts a where a.job_id = j.id), '[]') as attempt_rows
from "SCHEMA".jobs j order by j.id`;

export async function readTimelines(stack: ScenarioRows): Promise<JobTimeline[]> {
  const { rows } = await stack.pool.query<any>(TIMELINE.replaceAll("SCHEMA", stack.schema));
  return rows.map((r) => ({
    id: r.id, name: r.name, queue: r.queue, status: r.status, group: r.group_key, payload: r.payload, attempts: r.attempts,
    createdAt: Number(r.created_ms), runAt: Number(r.run_ms),
    starts: r.starts, finishes: r.finishes, attemptRows: r.attempt_rows,
  }));
}

/** Statuses of all jobs, counted. */
export async function statusCounts(stack: ScenarioRows): Promise<Record<string, number>> {
  const { rows } = await stack.pool.query<{ status: string; n: number }>(
    `select status::text, count(*)::int as n from "${stack.schema}".jobs group by 1`,
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

/** Waits until every job is terminal (succeeded, dead, cancelled), or the deadline. Returns whether it got there. */
export async function drain(stack: ScenarioRows, deadline: number, pollMs = 250): Promise<boolean> {
  for (;;) {
    const counts = await statusCounts(stack);
    if ((counts.queued ?? 0) + (counts.running ?? 0) === 0) return true;
    if (Date.now() > deadline) return false;
    await sleep(pollMs);
  }
}

/** Database clock, epoch ms. */
export async function dbNow(stack: Pick<ScenarioRows, "pool">): Promise<number> {
  const { rows } = await stack.pool.query<{ ms: number }>("select extract(epoch from clock_timestamp()) * 1000 as ms");
  return Number(rows[0]!.ms);
}
