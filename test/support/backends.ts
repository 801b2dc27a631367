import type { Queryable } from "../../shared/db/db.ts";

/**
 * Ends backends of the current database with pg_terminate_backend, never the
 * caller's own: those of one application_name, or every other one. Returns
 * how many were ended.
 */
export async function terminateBackends(db: Queryable, filter: { applicationName?: string } = {}): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `select count(*) filter (where pg_terminate_backend(pid))::int as n
     from pg_stat_activity
     where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'
       and ($1::text is null or application_name = $1::text)`,
    [filter.applicationName ?? null],
  );
  return rows[0]!.n;
}
