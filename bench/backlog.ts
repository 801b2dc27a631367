import { createPgPool } from "../shared/db/drivers/pg.ts";
import { runChild } from "./children.ts";
import { checkpoint, dropDb, dsnFor, freshDb } from "./db.ts";
import { leasehold } from "./leasehold.ts";
import type { ExecResult } from "./lib.ts";
import { childArgs, type Phase } from "./phases.ts";
import { now, round } from "./stats.ts";

/**
 * Leasehold's execute throughput with a backlog already in the table.
 *
 * Which backlog is honest? The claim reads the partial index
 * jobs_ready_idx (queue, priority desc, run_at, id) where status = 'queued',
 * takes the first rows with run_at <= now(), and stops after `limit`.
 * - Jobs of ANOTHER queue are in another key range of the index: the claim
 *   never sees them. Measuring that says nothing.
 * - Jobs of the SAME queue with a LATER run_at (scheduled jobs, retries
 *   waiting out their backoff) or a LOWER priority sort after the ready jobs:
 *   the claim must still stop after its 20 rows. This is the meaningful case,
 *   and the target: `later` (same priority, run_at spread over the next day)
 *   and `lower` (priority -1, ready now: a deep queue of less urgent work).
 * - Jobs of the same queue with a HIGHER priority but a later run_at sort
 *   BEFORE the ready ones: every claim walks over all of them. `ahead`
 *   measures that worst case; it is reported, not a target.
 */

export type BacklogKind = "later" | "lower" | "ahead";

const BACKLOG_SQL: Record<BacklogKind, string> = {
  later: `0, now() + interval '1 hour' + g * interval '50 milliseconds'`,
  lower: `-1, now() - interval '1 second'`,
  ahead: `1, now() + interval '1 hour' + g * interval '50 milliseconds'`,
};

/** The claim's row-picking part, as in shared/lifecycle/claim.ts, for EXPLAIN only. */
const PICK = `select id from leasehold.jobs
  where status = 'queued' and queue = 'bench' and run_at <= now() and lease_ms <= 60000
  order by priority desc, run_at, id limit 20 for update skip locked`;

export function backlogPhase(kind: BacklogKind, backlog: number, label: string): Phase {
  const name = `backlog-${kind}-${label}`;
  return {
    name,
    libs: ["leasehold"],
    title: `Execute with ${backlog.toLocaleString("en-US")} jobs queued (${kind})`,
    async run(_lib, ctx) {
      const db = `bench_leasehold_${name.replace(/-/g, "_")}_r${ctx.run}`;
      const n = ctx.sizes.batch;
      await freshDb(ctx.adminDsn, db);
      try {
        const dsn = dsnFor(ctx.adminDsn, db);
        const producer = await leasehold.open(dsn, "bench");
        // Setup, not the runner: a 1,000,000-row insert and its vacuum take longer than a runner query may.
        const pool = createPgPool(dsn, { max: 1, queryTimeoutMs: 600_000 });
        let insertMs: number;
        let plan: Record<string, unknown>;
        try {
          const t = now();
          await pool.query(
            `insert into leasehold.jobs (queue, name, payload, priority, run_at, max_attempts, lease_ms, backoff_ms)
             select 'bench', 'bench', jsonb_build_object('i', $2::int + g), ${BACKLOG_SQL[kind]}, 3, 30000, 1000
             from generate_series(1, $1::int) g`,
            [backlog, n],
          );
          insertMs = now() - t;
          await producer.prepareBatch(n)();
          // Autovacuum would analyze a table that grew this much; do it now rather than mid-run.
          await pool.query("vacuum analyze leasehold.jobs");
          plan = await explainClaim(pool);
        } finally {
          await producer.close();
          await pool.end();
        }
        const minId = await leasehold.firstId!(dsn, "bench");
        // The backlog ids come first; the jobs under test are the last n.
        const firstTest = minId + backlog;
        await checkpoint(ctx.adminDsn);
        const exec = await runChild<ExecResult>("leasehold", "exec", childArgs(ctx, leasehold, db, "bench", n, false, firstTest));
        return { kind, backlog, jobs: n, backlog_insert_ms: round(insertMs, 0), claim_plan: plan, exec };
      } finally {
        await dropDb(ctx.adminDsn, db);
      }
    },
    metrics: {
      jobs_per_s: (r) => r.exec.jobs_per_s,
      exec_ms: (r) => r.exec.exec_ms,
      claim_buffers: (r) => r.claim_plan.shared_buffers,
      claim_ms: (r) => r.claim_plan.execution_ms,
    },
    check: (r: { exec: ExecResult }) => r.exec.db_ok && r.exec.ledger.duplicates === 0 && r.exec.ledger.missing === 0,
  };
}

/** EXPLAIN ANALYZE of the claim's pick, rolled back: plan shape, buffers touched, time. */
async function explainClaim(pool: ReturnType<typeof createPgPool>): Promise<Record<string, unknown>> {
  const client = await pool.connect();
  try {
    await client.query("begin");
    const { rows } = await client.query<{ "QUERY PLAN": any[] }>(`explain (analyze, buffers, format json) ${PICK}`);
    await client.query("rollback");
    const top = rows[0]!["QUERY PLAN"][0];
    const nodes: string[] = [];
    const walk = (p: any) => {
      nodes.push(p["Index Name"] ? `${p["Node Type"]} using ${p["Index Name"]}` : p["Node Type"]);
      for (const c of p.Plans ?? []) walk(c);
    };
    walk(top.Plan);
    return {
      nodes,
      index_scan: nodes.some((x) => x.startsWith("Index Scan using jobs_ready_idx")),
      shared_buffers: (top.Plan["Shared Hit Blocks"] ?? 0) + (top.Plan["Shared Read Blocks"] ?? 0),
      execution_ms: round(top["Execution Time"], 3),
    };
  } finally {
    client.release();
  }
}
