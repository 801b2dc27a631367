/**
 * A lever of the per-job budget tried before it is built: the budget of
 * Leasehold (bench/budget.ts, one worker, n jobs) on a database whose schema
 * was changed after the migrations by one variant's SQL, the variants in
 * alternating rounds. Only the bench's scratch databases are changed; the
 * queue's code and migrations are not.
 *
 *   npx tsx bench/budget-probe.ts [n=10000] [rounds=2] [variant,...]
 *
 * Counts (tuples, index entries, WAL) are exact; CPU is noisy on a loaded
 * host, so read it across rounds. A variant that removes a row or index the
 * code still uses shows what the write costs, not a working design (the
 * trigger that drops attempt rows costs CPU of its own: a lower bound).
 */
import { buildChildren } from "./children.ts";
import { DEFAULT_DSN, withClient } from "./db.ts";
import { measureBudget } from "./budget.ts";
import { leasehold } from "./leasehold.ts";
import type { Lib } from "./lib.ts";
import type { BenchContext } from "./phases.ts";
import { round } from "./stats.ts";

export const PROBES: Record<string, string> = {
  base: "",
  // Room on each page for the claim's and the settle's new versions.
  "fillfactor-50": "alter table leasehold.jobs set (fillfactor = 50)",
  // One queued-only index fewer at enqueue (the plain claim then plans on another index).
  "no-ready-idx": "drop index leasehold.jobs_ready_idx",
};

const probed = (text: string): Lib => ({
  ...leasehold,
  async open(dsn, queue) {
    const producer = await leasehold.open(dsn, queue);
    if (text) await withClient(dsn, (c) => c.query(text));
    return producer;
  },
});

if (import.meta.url === `file://${process.argv[1]}`) {
  const n = Number(process.argv[2] ?? 10_000);
  const rounds = Number(process.argv[3] ?? 2);
  const names = process.argv[4]?.split(",") ?? Object.keys(PROBES);
  await buildChildren();
  const adminDsn = process.env.BENCH_DSN ?? DEFAULT_DSN;
  for (let run = 1; run <= rounds; run++) {
    for (const name of names) {
      const ctx: BenchContext = { adminDsn, sizes: { batch: n, seq: 1, hop: 1, slots: 20, scaleOut: 1 }, run, poolSize: 8, log: () => {} };
      const s = await measureBudget(probed(PROBES[name]!), ctx, n, name.replace(/\W/g, "_"));
      const e = s.execute.counts;
      const q = s.enqueue.counts;
      const per = (x: number) => round(x / n, 2);
      const byStatement = Object.entries(s.execute.wire.by_statement).map(([k, v]) => `${k.slice(0, 16)}… ${per(v.cpu_us)}`).join(", ");
      console.log(`${name.padEnd(15)} round ${run}: execute: inserted ${per(e.heap_inserted)}, LOCK ${per(e.heap_locked)}, entries ${per(e.index_inserted)}, ` +
        `WAL ${per(e.wal_bytes)} B, Postgres ${per(e.pg_cpu_us)} µs (${byStatement}), worker ${per(e.worker_cpu_us)} µs | ` +
        `enqueue: entries ${per(q.index_inserted)}, WAL ${per(q.wal_bytes)} B, Postgres ${per(q.pg_cpu_us)} µs`);
    }
  }
  process.exit(0);
}
