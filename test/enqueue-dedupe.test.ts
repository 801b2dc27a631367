import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { enqueue, enqueueJobs, job, type JobSpec } from "../shared/jobs/enqueue.ts";
import { defineJob } from "../shared/jobs/job.ts";
import { completeJobs } from "../shared/lifecycle/settle.ts";
import { createTestDb, type TestDb } from "./support/db.ts";

const keyed = defineJob({ name: "keyed", schema: z.object({ n: z.number().int() }), queue: "keyed", handler: () => {} });
/** On a queue of its own, so a claim finds only its job. */
const held = defineJob({ name: "held", schema: z.object({ n: z.number().int() }), queue: "held", handler: () => {} });

/** A small seeded generator, so a failing round can be replayed. */
function random(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffled<T>(items: readonly T[], rand: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe("deduplicated enqueue under concurrency", () => {
  const BATCHES = 4;
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", BATCHES + 2);
  });
  afterAll(() => t.drop());

  it("runs 200 rounds of concurrent batches sharing keys in random orders: no deadlock, one job per key", async () => {
    const rand = random(12);
    let deadlocks = 0;
    for (let round = 0; round < 200; round++) {
      const keys = Array.from({ length: 8 }, (_, k) => `r${round}-k${k}`);
      const batches = Array.from({ length: BATCHES }, () =>
        shuffled(keys, rand)
          .slice(0, 4 + Math.floor(rand() * 5))
          .map((dedupeKey, n) => job(keyed, { n }, { dedupeKey })),
      );
      const settled = await Promise.allSettled(batches.map((specs) => enqueueJobs(t, specs)));
      const failures = settled.flatMap((s) => (s.status === "rejected" ? [s.reason as { code?: string }] : []));
      deadlocks += failures.filter((f) => f.code === "40P01").length;
      expect(failures).toEqual([]);

      const idsByKey = new Map<string, Set<string>>();
      const newByKey = new Map<string, number>();
      settled.forEach((s, b) => {
        if (s.status !== "fulfilled") return;
        s.value.forEach(({ id, existing }, i) => {
          const key = batches[b]![i]!.options!.dedupeKey!;
          idsByKey.set(key, (idsByKey.get(key) ?? new Set()).add(id));
          if (!existing) newByKey.set(key, (newByKey.get(key) ?? 0) + 1);
        });
      });
      const { rows } = await t.admin.query<{ dedupe_key: string; jobs: number }>(
        `select dedupe_key, count(*)::int as jobs from "${t.schema}".jobs where dedupe_key like $1 group by dedupe_key`,
        [`r${round}-%`],
      );
      const used = [...idsByKey.keys()].sort();
      expect(rows.map((r) => r.dedupe_key).sort()).toEqual(used);
      expect(rows.every((r) => r.jobs === 1)).toBe(true);
      // Every batch got the one job of each key; exactly one batch created it.
      expect(used.every((k) => idsByKey.get(k)!.size === 1 && newByKey.get(k) === 1)).toBe(true);
    }
    expect(deadlocks).toBe(0);
  });

  it("returns a mixed batch's results in the caller's order: new, existing and keyless jobs", async () => {
    const [pending] = await enqueueJobs(t, [job(keyed, { n: 0 }, { dedupeKey: "mixed-z" })]);
    const specs: JobSpec[] = [
      job(keyed, { n: 1 }),
      job(keyed, { n: 2 }, { dedupeKey: "mixed-z" }),
      job(keyed, { n: 3 }, { dedupeKey: "mixed-a" }),
      job(keyed, { n: 4 }),
    ];
    const results = await enqueueJobs(t, specs);
    expect(results.map((r) => r.existing)).toEqual([false, true, false, false]);
    expect(results[1]!.id).toBe(pending!.id);
    const { rows } = await t.admin.query<{ id: string; n: number }>(
      `select id::text, (payload->>'n')::int as n from "${t.schema}".jobs where id = any($1::bigint[])`,
      [results.map((r) => r.id)],
    );
    const n = new Map(rows.map((r) => [r.id, r.n]));
    expect(results.map((r) => n.get(r.id))).toEqual([1, 0, 3, 4]);
  });

  it("inside an open transaction, returns the pending job without blocking its runner from settling it", async () => {
    const { id } = await enqueue(t, held, { n: 0 }, { dedupeKey: "held" });
    const [claimed] = await claimJobs(t, { queue: "held", runnerId: "runner-1", limit: 1, maxLeaseMs: 60_000 });
    expect(claimed!.id).toBe(id);
    const caller = await t.pool.connect();
    const runner = await t.pool.connect();
    try {
      await caller.query("begin");
      expect(await enqueue({ db: caller, schema: t.schema }, held, { n: 1 }, { dedupeKey: "held" })).toEqual({ id, existing: true });
      // Any wait for the caller's transaction fails here instead of hanging.
      await runner.query("set lock_timeout = '500ms'");
      const completed = await completeJobs({ db: runner, schema: t.schema }, [{ id, leaseToken: claimed!.leaseToken }]);
      expect([...completed]).toEqual([id]);
      await caller.query("commit");
    } finally {
      await caller.query("rollback").catch(() => {});
      caller.release();
      runner.release();
    }
  });
});
