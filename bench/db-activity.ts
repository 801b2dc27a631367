import { readFileSync } from "node:fs";
import pg from "pg";
import { withClient } from "./db.ts";
import { now, round, sleep } from "./stats.ts";

/**
 * What a library's backends do while it works, read from the server's own
 * statistics: transactions committed in its database (pg_stat_database), and
 * what its busy backends wait on (pg_stat_activity, sampled). Both are read
 * on the admin database, so the reading adds nothing to the figures.
 */

/** Committed transactions of database `db` so far, as flushed to the statistics. */
export async function xactCommits(adminDsn: string, db: string): Promise<number> {
  return withClient(adminDsn, async (c) =>
    Number((await c.query<{ n: string }>("select xact_commit::text as n from pg_stat_database where datname = $1", [db])).rows[0]?.n ?? 0));
}

/**
 * Waits until database `db` has no client backend left. A backend flushes its
 * statistics before it leaves pg_stat_activity, so after this every commit
 * made in `db` is counted in pg_stat_database.
 */
export async function waitNoBackends(adminDsn: string, db: string, timeoutMs = 30_000): Promise<void> {
  await withClient(adminDsn, async (c) => {
    const t0 = now();
    const q = "select count(*)::int as n from pg_stat_activity where datname = $1 and backend_type = 'client backend'";
    while ((await c.query<{ n: number }>(q, [db])).rows[0]!.n > 0) {
      if (now() - t0 > timeoutMs) throw new Error(`backends of ${db} still connected after ${timeoutMs} ms`);
      await sleep(20);
    }
  });
}

export interface ActivitySummary {
  samples: number;
  /** Active backends summed over the samples (backend-samples). */
  busy: number;
  /** Busy backend-samples waiting on WAL (wait_event WALWrite or WALSync) or any other IO. */
  wal_or_io_wait: number;
  /** wal_or_io_wait ÷ busy. */
  wal_wait_share: number | null;
  /** Mean active backends per sample. */
  busy_per_sample: number | null;
  /** Busy backend-samples by "type:event" ("cpu" when not waiting), most first. */
  by_event: Record<string, number>;
}

const ACTIVE = `select wait_event_type, wait_event from pg_stat_activity
  where datname = $1 and state = 'active' and backend_type = 'client backend' and pid <> all($2::int[])`;

/** Samples the busy backends of `db` every `everyMs` until `stop()`; `excludePids` are the driver's own. */
export async function sampleActivity(adminDsn: string, db: string, excludePids: number[], everyMs = 10) {
  const client = new pg.Client({ connectionString: adminDsn });
  await client.connect();
  let stopped = false;
  const s = { samples: 0, busy: 0, wait: 0, events: new Map<string, number>() };
  const loop = (async () => {
    while (!stopped) {
      const t = now();
      const { rows } = await client.query<{ wait_event_type: string | null; wait_event: string | null }>(ACTIVE, [db, excludePids]);
      s.samples++;
      for (const r of rows) {
        s.busy++;
        const key = r.wait_event ? `${r.wait_event_type}:${r.wait_event}` : "cpu";
        s.events.set(key, (s.events.get(key) ?? 0) + 1);
        if (r.wait_event === "WALWrite" || r.wait_event === "WALSync" || r.wait_event_type === "IO") s.wait++;
      }
      await sleep(Math.max(0, everyMs - (now() - t)));
    }
  })();
  return {
    async stop(): Promise<ActivitySummary> {
      stopped = true;
      await loop;
      await client.end();
      return {
        samples: s.samples,
        busy: s.busy,
        wal_or_io_wait: s.wait,
        wal_wait_share: s.busy ? round(s.wait / s.busy, 3) : null,
        busy_per_sample: s.samples ? round(s.busy / s.samples, 2) : null,
        by_event: Object.fromEntries([...s.events].sort((a, b) => b[1] - a[1])),
      };
    },
  };
}

/** CPU ms of every backend of `db` but ours (they live through the drain: pools). */
export async function backendCpu(admin: pg.Client, db: string): Promise<Map<number, number>> {
  const { rows } = await admin.query<{ pid: number }>("select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()", [db]);
  const cpu = new Map<number, number>();
  for (const { pid } of rows) {
    try { cpu.set(pid, Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1e6); } catch {}
  }
  return cpu;
}
