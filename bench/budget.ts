import pg from "pg";
import { runChild, type ChildLib } from "./children.ts";
import { waitNoBackends } from "./db-activity.ts";
import { checkpoint, dropDb, dsnFor, freshDb, withClient, type Route } from "./db.ts";
import type { ExecResult, Lib, LibId } from "./lib.ts";
import { childArgs, type BenchContext, type Phase } from "./phases.ts";
import { now, round, sleep } from "./stats.ts";
import { startWireCounter, type WireCounts } from "./wire-count.ts";
import { BUDGET_ROWS, budgetMetrics, perJob, type SectionCounts } from "./budget-report.ts";

export { budgetMarkdown, BUDGET_ROWS, perJob, type PerJob, type SectionCounts } from "./budget-report.ts";

/**
 * Where the work goes per job, counted rather than timed where it can be, so
 * the figures hold on a loaded host: enqueue `n` jobs in one call, then one
 * worker child of the bench's slots executes them, with every connection of
 * the library through a counting proxy (bench/wire-count.ts) and the WAL of
 * the window read back with pg_walinspect, record by record, keeping only the
 * records of the library's own database (by the relation each touches, and
 * the commit records of those transactions). Per section (enqueue, execute):
 *
 * - CPU: the worker process (its own CPU, or the driver's around the enqueue
 *   call) and the Postgres backends behind its connections (schedstat, ns);
 * - the wire: round trips, statements, Parse messages, transactions, bytes;
 * - the WAL: heap tuples inserted, updated (HOT or not), deleted and locked,
 *   B-tree entries inserted, records, bytes without and with full-page images;
 * - pg_stat_user_tables of the library's schema (n_tup_ins/upd/hot_upd/del),
 *   a cross-check of the WAL's heap counts.
 *
 * Per job is the count at n ÷ n. The CPU is also given at the margin: the
 * same is measured at n and at n/10 on fresh databases, and (at n − at n/10)
 * ÷ (n − n/10) leaves out what does not grow with n (connections, the first
 * statements of a cold backend, the worker's stop). The worker's CPU is
 * counted from its first job's start (its start-up is not a per-job cost);
 * a backend's from the end of its start-up (BackendKeyData).
 */

/** WAL rows (relation × record type) kept in each raw record. */
const WAL_ROWS_KEPT = 30;

const SCHEMAS: Record<LibId, string> = { leasehold: "leasehold", graphile: "graphile_worker", pgboss: "pgboss" };

/** WAL records of the library's database in a window, by relation, resource manager and record type. */
export interface WalRow {
  rel: string;
  rm: string;
  type: string;
  records: number;
  bytes: number;
  fpi_bytes: number;
  tuples: number;
}

interface TableStat {
  rel: string;
  n_tup_ins: number;
  n_tup_upd: number;
  n_tup_hot_upd: number;
  n_tup_del: number;
}

interface Section {
  counts: SectionCounts;
  wire: WireCounts;
  wal: WalRow[];
  tables: TableStat[];
}

export interface BudgetSample {
  n: number;
  enqueue: Section;
  execute: Section;
  exec: ExecResult & { process_cpu_us?: { user: number; system: number } };
}

const WAL = `with r as (
  select xid::text as xid, resource_manager as rm, record_type as rt, record_length as len, fpi_length as fpi,
         description as d, regexp_match(block_ref, 'rel \\d+/(\\d+)/(\\d+)') as m
  from pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)
), mine as (select distinct xid from r where r.m[1] = $3 and xid <> '0')
select rm, rt as type, coalesce(m[2], '') as filenode, count(*)::int as records, sum(len)::bigint::text as bytes,
       sum(fpi)::bigint::text as fpi_bytes,
       sum(case when rt like 'MULTI_INSERT%' then (regexp_match(d, '(\\d+)'))[1]::int else 1 end)::int as tuples
from r where m[1] = $3 or (xid <> '0' and xid in (select xid from mine))
group by 1, 2, 3`;

const RELS = `select pg_relation_filenode(c.oid)::text as filenode, n.nspname || '.' || c.relname as rel
  from pg_class c join pg_namespace n on n.oid = c.relnamespace where pg_relation_filenode(c.oid) is not null`;

const TABLES = `select schemaname || '.' || relname as rel, n_tup_ins::int, n_tup_upd::int, n_tup_hot_upd::int, n_tup_del::int
  from pg_stat_user_tables where schemaname = $1 order by 1`;

const userRel = (rel: string) => !rel.startsWith("pg_catalog.") && !rel.startsWith("pg_toast.") && !rel.startsWith("?");

/** Sums a window's WAL rows into the budget's counters. */
export function walCounts(rows: WalRow[]) {
  const sum = (f: (r: WalRow) => boolean, v: (r: WalRow) => number = (r) => r.tuples) => rows.filter(f).reduce((a, r) => a + v(r), 0);
  const heap = (r: WalRow) => (r.rm === "Heap" || r.rm === "Heap2") && userRel(r.rel);
  const type = (r: WalRow) => r.type.replace(/\+INIT$/, "");
  return {
    heap_inserted: sum((r) => heap(r) && (type(r) === "INSERT" || type(r) === "MULTI_INSERT")),
    heap_updated: sum((r) => heap(r) && (type(r) === "UPDATE" || type(r) === "HOT_UPDATE")),
    heap_hot_updated: sum((r) => heap(r) && type(r) === "HOT_UPDATE"),
    heap_deleted: sum((r) => heap(r) && type(r) === "DELETE"),
    heap_locked: sum((r) => heap(r) && (type(r) === "LOCK" || type(r) === "LOCK_UPDATED")),
    index_inserted: sum((r) => r.rm === "Btree" && userRel(r.rel) && (r.type === "INSERT_LEAF" || r.type === "INSERT_POST")),
    index_splits: sum((r) => r.rm === "Btree" && userRel(r.rel) && r.type.startsWith("SPLIT")),
    wal_records: sum(() => true, (r) => r.records),
    wal_bytes: sum(() => true, (r) => r.bytes - r.fpi_bytes),
    wal_fpi_bytes: sum(() => true, (r) => r.fpi_bytes),
    wal_commits: sum((r) => r.rm === "Transaction" && r.type.startsWith("COMMIT"), (r) => r.records),
  };
}

async function readWal(dsn: string, from: string, to: string, dbOid: string): Promise<WalRow[]> {
  return withClient(dsn, async (c) => {
    const names = new Map((await c.query<{ filenode: string; rel: string }>(RELS)).rows.map((r) => [r.filenode, r.rel]));
    const { rows } = await c.query<{ rm: string; type: string; filenode: string; records: number; bytes: string; fpi_bytes: string; tuples: number }>(WAL, [from, to, dbOid]);
    return rows
      .map((r) => ({
        rel: r.filenode ? (names.get(r.filenode) ?? `?${r.filenode}`) : "",
        rm: r.rm, type: r.type, records: r.records, bytes: Number(r.bytes), fpi_bytes: Number(r.fpi_bytes), tuples: r.tuples,
      }))
      .sort((a, b) => b.bytes - a.bytes);
  });
}

const sumStats = (before: TableStat[], after: TableStat[], k: keyof Omit<TableStat, "rel">) =>
  after.reduce((a, t) => a + t[k], 0) - before.reduce((a, t) => a + t[k], 0);

function tableDelta(before: TableStat[], after: TableStat[]): TableStat[] {
  const b = new Map(before.map((t) => [t.rel, t]));
  return after
    .map((t) => ({
      rel: t.rel,
      n_tup_ins: t.n_tup_ins - (b.get(t.rel)?.n_tup_ins ?? 0),
      n_tup_upd: t.n_tup_upd - (b.get(t.rel)?.n_tup_upd ?? 0),
      n_tup_hot_upd: t.n_tup_hot_upd - (b.get(t.rel)?.n_tup_hot_upd ?? 0),
      n_tup_del: t.n_tup_del - (b.get(t.rel)?.n_tup_del ?? 0),
    }))
    .filter((t) => t.n_tup_ins || t.n_tup_upd || t.n_tup_del);
}

function section(wire: WireCounts, wal: WalRow[], before: TableStat[], after: TableStat[], workerCpuUs: number, pgCpuNs: number): Section {
  return {
    counts: {
      worker_cpu_us: Math.round(workerCpuUs),
      pg_cpu_us: Math.round(pgCpuNs / 1000),
      round_trips: wire.round_trips,
      statements: wire.statements,
      parses: wire.frontend.P ?? 0,
      transactions: wire.transactions,
      wire_bytes: wire.bytes_up + wire.bytes_down,
      connections: wire.connections,
      ...walCounts(wal),
      stat_tup_ins: sumStats(before, after, "n_tup_ins"),
      stat_tup_upd: sumStats(before, after, "n_tup_upd"),
      stat_tup_hot_upd: sumStats(before, after, "n_tup_hot_upd"),
      stat_tup_del: sumStats(before, after, "n_tup_del"),
    },
    wire,
    // The largest records by bytes, enough to say what the budget is made of; the counts above are of all.
    wal: wal.slice(0, WAL_ROWS_KEPT),
    tables: tableDelta(before, after),
  };
}

/** Enqueue n in one call, execute them with one worker child, on a fresh database; counts both sections. */
export async function measureBudget(lib: Lib, ctx: BenchContext, n: number, tag: string): Promise<BudgetSample> {
  const db = `bench_${lib.id}_budget_${tag}_r${ctx.run}`;
  const adminUrl = new URL(ctx.adminDsn);
  const upstream: Route = { host: adminUrl.hostname, port: Number(adminUrl.port || 5432) };
  const direct = dsnFor(ctx.adminDsn, db);
  await freshDb(ctx.adminDsn, db);
  const wire = await startWireCounter(upstream);
  const admin = new pg.Client({ connectionString: ctx.adminDsn });
  await admin.connect();
  try {
    // Holds the window's WAL until it is read (a checkpoint elsewhere could recycle it); dropped with this session.
    await admin.query("select pg_create_physical_replication_slot($1, true, true)", [`budget_${process.pid}_${db}`.slice(0, 63)]);
    await withClient(direct, (c) => c.query("create extension if not exists pg_walinspect"));
    const dbOid = (await admin.query<{ oid: string }>("select oid::text from pg_database where datname = $1", [db])).rows[0]!.oid;
    const lsn = async () => (await admin.query<{ l: string }>("select pg_current_wal_insert_lsn()::text as l")).rows[0]!.l;
    const tables = () => withClient(direct, async (c) => (await c.query<TableStat>(TABLES, [SCHEMAS[lib.id]])).rows);
    await waitNoBackends(ctx.adminDsn, db);
    await checkpoint(ctx.adminDsn);

    // Enqueue: install the library, then one call of n, the only thing counted (wire, WAL, CPU).
    const producer = await lib.open(dsnFor(ctx.adminDsn, db, wire.route), "bench");
    let callCpuUs = 0;
    let enqWire = wire.take();
    let lsn0 = "";
    let lsn1 = "";
    try {
      const call = producer.prepareBatch(n);
      wire.take();
      lsn0 = await lsn();
      const cpu0 = process.cpuUsage();
      await call();
      const cpu = process.cpuUsage(cpu0);
      enqWire = wire.take();
      lsn1 = await lsn();
      callCpuUs = cpu.user + cpu.system;
      const count = await producer.count();
      if (count !== n) throw new Error(`${lib.id}: expected ${n} jobs, found ${count}`);
    } finally {
      await producer.close();
    }
    await waitNoBackends(ctx.adminDsn, db);
    wire.take();
    const mid = await tables();

    // Execute: one worker child, every connection through the counter.
    const minId = await lib.firstId?.(direct, "bench");
    await checkpoint(ctx.adminDsn);
    const before = await tables();
    const lsn2 = await lsn();
    const exec = await runChild<ExecResult & { process_cpu_us?: { user: number; system: number } }>(lib.id as ChildLib, "exec", {
      ...childArgs(ctx, lib, db, "bench", n, false, minId),
      dsn: dsnFor(ctx.adminDsn, db, wire.route),
    });
    await waitNoBackends(ctx.adminDsn, db);
    const execWire = wire.take();
    const lsn3 = await lsn();
    const after = await tables();
    // pg_walinspect reads only flushed WAL.
    const t0 = now();
    while ((await admin.query<{ ok: boolean }>("select pg_current_wal_flush_lsn() >= $1::pg_lsn as ok", [lsn3])).rows[0]!.ok === false) {
      if (now() - t0 > 10_000) throw new Error("WAL not flushed after 10 s");
      await sleep(20);
    }
    const [walEnq, walExec] = [await readWal(direct, lsn0, lsn1, dbOid), await readWal(direct, lsn2, lsn3, dbOid)];
    // The worker's CPU from its first job's start to its exit: start-up (node, modules, connecting) left out.
    const childCpu = exec.process_cpu_us ? exec.process_cpu_us.user + exec.process_cpu_us.system - (exec.ledger.cpu_at_first_hit_us ?? 0) : NaN;
    return {
      n,
      // The call alone, but pg_stat_user_tables, which counts the install's few rows too.
      enqueue: section(enqWire, walEnq, [], mid, callCpuUs, enqWire.backend_cpu_ns),
      execute: section(execWire, walExec, before, after, childCpu, execWire.backend_cpu_ns),
      exec,
    };
  } finally {
    await admin.end();
    await wire.close();
    await dropDb(ctx.adminDsn, db);
  }
}

export function budgetPhase(libs: readonly LibId[]): Phase {
  return {
    name: "budget",
    libs,
    title: "Per-job budget: CPU, round trips, tuples, index entries and WAL per job (enqueue n in one call, execute with one worker)",
    async run(lib, ctx) {
      const n = ctx.sizes.batch;
      const n0 = Math.max(1, Math.round(n / 10));
      const small = await measureBudget(lib, ctx, n0, "small");
      const big = await measureBudget(lib, ctx, n, "big");
      const per_job = {
        execute: perJob(big.execute.counts, small.execute.counts, n, n0),
        enqueue: perJob(big.enqueue.counts, small.enqueue.counts, n, n0),
      };
      ctx.log(`  ${lib.id} execute per job: ${BUDGET_ROWS.map(([k]) => `${k}=${per_job.execute[k]}`).join(" ")}`);
      ctx.log(`  ${lib.id} enqueue per job: ${BUDGET_ROWS.map(([k]) => `${k}=${per_job.enqueue[k]}`).join(" ")}`);
      const byStatement = (w: WireCounts) => Object.entries(w.by_statement)
        .map(([statement, x]) => ({ statement, count: x.count, cpu_us_per_job: round(x.cpu_us / n, 2) }))
        .sort((a, b) => b.cpu_us_per_job - a.cpu_us_per_job);
      const pg_by_statement = { execute: byStatement(big.execute.wire), enqueue: byStatement(big.enqueue.wire) };
      return { n, n0, per_job, pg_by_statement, samples: { small, big }, exec_ok: [small, big].every((s) => s.exec.db_ok && s.exec.ledger.duplicates === 0 && s.exec.ledger.missing === 0) };
    },
    metrics: budgetMetrics(),
    check: (r) => r.exec_ok === true,
  };
}
