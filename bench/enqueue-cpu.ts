/**
 * The one-call enqueue by CPU as well as time, for a host too busy for wall
 * times alone (bench/levers.md, lever 8):
 *
 *   npx tsx bench/enqueue-cpu.ts [runs=5] [libs=leasehold,graphile,pgboss] [n=10000]
 *
 * Each run and library: a fresh database, the library's producer as the
 * bench's batch phase opens it, the specs built beforehand, CHECKPOINT, then
 * one call timed, with this process's CPU (process.cpuUsage) and the CPU of
 * every backend of that database (/proc/<pid>/schedstat; Postgres on this
 * host) around it. Runs interleave the libraries; ratios pair by run.
 */
import { readFileSync } from "node:fs";
import pg from "pg";
import { checkpoint, dropDb, dsnFor, freshDb, DEFAULT_DSN } from "./db.ts";
import { loadLib } from "./driver.ts";
import type { LibId } from "./lib.ts";
import { now } from "./stats.ts";

const admin = process.env.BENCH_DSN ?? DEFAULT_DSN;
const runs = Number(process.argv[2] ?? 5);
const libs = (process.argv[3] ?? "leasehold,graphile,pgboss").split(",") as LibId[];
const n = Number(process.argv[4] ?? 10_000);
// A peer's pool may still be closing when its database is dropped.
process.on("uncaughtException", (e: { code?: string }) => {
  if (e?.code !== "57P01") throw e;
});

const L = Object.fromEntries(await Promise.all(libs.map(async (id) => [id, await loadLib(id)] as const)));
const cpuMs = (pid: number) => {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1e6;
  } catch {
    return 0;
  }
};
const client = new pg.Client({ connectionString: admin });
await client.connect();
const backends = async (db: string) =>
  (await client.query<{ pid: number }>("select pid from pg_stat_activity where datname = $1", [db])).rows.map((r) => r.pid);

const res: Record<string, { wall: number[]; node: number[]; pg: number[] }> = {};
for (let r = 0; r < runs; r++) {
  for (const id of libs) {
    const db = `enqueue_cpu_${id}`;
    await freshDb(admin, db);
    const producer = await L[id]!.open(dsnFor(admin, db), "bench");
    const call = producer.prepareBatch(n);
    await checkpoint(admin);
    const pids = await backends(db);
    const pg0 = pids.reduce((s, p) => s + cpuMs(p), 0);
    const c0 = process.cpuUsage();
    const t = now();
    await call();
    const wall = now() - t;
    const c = process.cpuUsage(c0);
    const o = (res[id] ??= { wall: [], node: [], pg: [] });
    o.wall.push(wall);
    o.node.push((c.user + c.system) / 1000);
    o.pg.push(pids.reduce((s, p) => s + cpuMs(p), 0) - pg0);
    await producer.close();
    await new Promise((done) => setTimeout(done, 300));
    await dropDb(admin, db);
  }
}
await client.end();

const med = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
const f = (x: number) => x.toFixed(0);
for (const id of libs) {
  const o = res[id]!;
  console.log(`${id.padEnd(10)} wall ${f(med(o.wall))} ms, process CPU ${f(med(o.node))} ms, Postgres CPU ${f(med(o.pg))} ms (medians; walls ${o.wall.map(f).join(" ")})`);
}
const peers = libs.filter((l) => l !== "leasehold");
if (res.leasehold && peers.length > 0) {
  for (const [what, of] of [["wall", (id: string, i: number) => res[id]!.wall[i]!], ["CPU", (id: string, i: number) => res[id]!.node[i]! + res[id]!.pg[i]!]] as const) {
    const ratios = res.leasehold.wall.map((_, i) => of("leasehold", i) / Math.min(...peers.map((p) => of(p, i))));
    console.log(`Leasehold ÷ fastest peer, ${what}: median ${med(ratios).toFixed(2)}, worst ${Math.max(...ratios).toFixed(2)} (${ratios.map((x) => x.toFixed(2)).join(" ")})`);
  }
}
process.exit(0);
