import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { claimJobs, type ClaimedJob } from "../shared/lifecycle/claim.ts";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { createRegistry, defineJob } from "../shared/jobs/job.ts";
import { schedulePass } from "../functions/scheduler.ts";
import config from "../leasehold.config.ts";
import { rescueExpiredLeases } from "../shared/lifecycle/rescue.ts";
import { completeJobs, failJobs, releaseJobs } from "../shared/lifecycle/settle.ts";
import { nextTurn } from "../shared/runner/clock.ts";
import { createTestDb, drivers, expireLeases, type TestDb } from "./support/db.ts";

const payload = z.object({ key: z.string(), n: z.number().int() });
const oneAtATime = defineJob({
  name: "one-at-a-time", schema: payload, handler: () => {}, backoffMs: 0, leaseMs: 60_000,
  concurrency: { limit: 1, key: (p) => p.key },
});
const perGroup = defineJob({ name: "per-group", schema: payload, handler: () => {}, concurrency: { limit: 2 } });

describe.each(drivers)("concurrency limits (%s driver)", (driver) => {
  let t: TestDb;
  let queueNo = 0;
  const freshQueue = () => `l${queueNo++}`;
  beforeAll(async () => {
    t = await createTestDb(driver, 4);
  });
  afterAll(() => t.drop());

  const claim = (queue: string, limit = 10) => claimJobs(t, { queue, runnerId: "r", limit, maxLeaseMs: 60_000 });
  const enqueueKeyed = (queue: string, key: string, n: number) =>
    enqueueJobs(t, Array.from({ length: n }, (_, i) => job(oneAtATime, { key, n: i }, { queue })));

  it("runs a key's jobs one at a time with a limit of 1, and other keys beside them", async () => {
    const queue = freshQueue();
    await enqueueKeyed(queue, "k1", 3);
    await enqueueKeyed(queue, "k2", 3);
    const first = await claim(queue);
    expect(first).toHaveLength(2);
    expect(await claim(queue)).toEqual([]);
    await completeJobs(t, first.slice(0, 1));
    expect(await claim(queue)).toHaveLength(1);
    expect(await claim(queue)).toEqual([]);
  });

  it("frees the slot when the job fails, is released, or its lease is rescued", async () => {
    const queue = freshQueue();
    await enqueueKeyed(queue, "k", 4);
    const a = (await claim(queue))[0]!;
    expect(await claim(queue)).toEqual([]);
    await failJobs(t, [{ ...a, outcome: "failed", error: "boom", retryDelayMs: 60_000 }]);
    const b = (await claim(queue))[0]!;
    expect(b.id).not.toBe(a.id);
    expect(await claim(queue)).toEqual([]);
    await releaseJobs(t, [b]);
    const c = (await claim(queue))[0]!;
    expect(await claim(queue)).toEqual([]);
    expect(await expireLeases(t, "id = $1", [c.id])).toBe(1); // c's runner dies: its lease runs out
    expect(await claim(queue)).toEqual([]); // expired but not yet rescued: still holds the slot
    const rescue = await rescueExpiredLeases(t);
    expect(rescue.rescued + rescue.refunded).toBeGreaterThanOrEqual(1);
    expect(await claim(queue)).toHaveLength(1);
    expect(c).toBeDefined();
  });

  it("keys by the group when the type names no key", async () => {
    const queue = freshQueue();
    for (const group of ["t1", "t2"]) {
      await enqueueJobs(t, Array.from({ length: 5 }, (_, n) => job(perGroup, { key: "-", n }, { queue, group })));
    }
    const claimed = await claim(queue, 20);
    const { rows } = await t.admin.query<{ group_key: string; n: number }>(
      `select group_key, count(*)::int as n from "${t.schema}".jobs where queue = $1 and status = 'running' group by 1 order by 1`,
      [queue]);
    expect(claimed).toHaveLength(4);
    expect(rows).toEqual([{ group_key: "t1", n: 2 }, { group_key: "t2", n: 2 }]);
  });

  it("refuses a concurrency key that is not a non-empty string, naming the payload", async () => {
    const bad = defineJob({ name: "bad-key", schema: payload, handler: () => {}, concurrency: { limit: 1, key: (p) => p.key } });
    await expect(enqueue(t, bad, { key: "", n: 1 })).rejects.toThrow(/concurrency key/);
  });
});

describe("concurrency limits under concurrent claimers and killed runners (pg driver)", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 20);
  });
  afterAll(() => t.drop());

  it("never runs more than 2 of a key at once over 50 keys; loses no job; reruns only jobs a killed runner held", async () => {
    const queue = "oracle";
    const keys = 50;
    const limited = defineJob({
      name: "limited", schema: payload, handler: () => {}, leaseMs: 60_000, backoffMs: 0, maxAttempts: 100,
      concurrency: { limit: 2, key: (p) => p.key },
    });
    // Half the keys' jobs bunched, half interleaved: claims meet keys at and under their limit.
    await enqueueJobs(t, Array.from({ length: 1_000 }, (_, n) =>
      job(limited, { key: n < 500 ? `k${Math.floor(n / 20)}` : `k${25 + (n % 25)}`, n }, { queue })));

    // The oracle: every handler start and end, per key, as the handlers see them.
    const runningByKey = new Map<string, number>();
    let maxRunning = 0;
    const starts = new Map<string, number>();
    const keyOf = (j: ClaimedJob) => (j.payload as { key: string }).key;
    const heldByKilled = new Set<string>();
    const killedRunners: string[] = [];
    let done = false;
    // A runner that finds nothing to claim rescues: the killed runners' leases
    // run out (moved into the past, not waited for; a live runner's never
    // does), then the rescue. It also ends the run once every job succeeded.
    // One rescuer at a time, as in a deployment (the rescuer is a singleton).
    let rescuing: Promise<void> | null = null;
    const rescueOrEnd = () => (rescuing ??= (async () => {
      await expireLeases(t, "runner_id = any($1::text[])", [killedRunners]);
      await rescueExpiredLeases(t);
      const { rows } = await t.admin.query<{ n: number }>(
        `select count(*)::int as n from "${t.schema}".jobs where queue = $1 and status <> 'succeeded'`, [queue]);
      if (rows[0]!.n === 0) done = true;
    })().finally(() => (rescuing = null)));
    // A handler's work: a random number of turns of the event loop (others run meanwhile).
    const work = async () => {
      for (let i = Math.floor(Math.random() * 4); i > 0; i--) await nextTurn();
    };

    const runner = async (name: string) => {
      for (let life = 0; !done; life++) {
        // Each life of the runner ends in a kill with probability 1/4, somewhere in its claims; the first lives of
        // runner0 and runner1 surely do, at their first and second claims, so that every run has kills to check.
        const sure = life === 0 && (name === "runner0" || name === "runner1");
        const killAfter = sure ? Number(name.slice(-1)) : Math.random() < 0.25 ? Math.floor(Math.random() * 5) : Number.POSITIVE_INFINITY;
        for (let claims = 0; !done; claims++) {
          const jobs = await claimJobs(t, { queue, runnerId: `${name}-${life}`, limit: 12, maxLeaseMs: 60_000 });
          if (jobs.length === 0) {
            await rescueOrEnd();
            continue;
          }
          const killed = claims >= killAfter;
          await Promise.all(jobs.map(async (j) => {
            const key = keyOf(j);
            const now = (runningByKey.get(key) ?? 0) + 1;
            runningByKey.set(key, now);
            maxRunning = Math.max(maxRunning, now);
            starts.set(j.id, (starts.get(j.id) ?? 0) + 1);
            await work();
            // A killed runner's handlers stop here; its leases stay held until rescued.
            runningByKey.set(key, runningByKey.get(key)! - 1);
            if (killed) heldByKilled.add(j.id);
          }));
          if (killed) {
            killedRunners.push(`${name}-${life}`);
            break;
          }
          await completeJobs(t, jobs);
        }
      }
    };
    await Promise.all(Array.from({ length: 12 }, (_, i) => runner(`runner${i}`)));

    const { rows } = await t.admin.query<{ status: string; n: number }>(
      `select status::text, count(*)::int as n from "${t.schema}".jobs where queue = $1 group by 1`, [queue]);
    expect(rows).toEqual([{ status: "succeeded", n: 1_000 }]);
    expect(maxRunning).toBe(2);
    const reran = [...starts].filter(([, n]) => n > 1).map(([id]) => id);
    expect(heldByKilled.size).toBeGreaterThan(0);
    expect(reran.length).toBeGreaterThan(0);
    expect(reran.filter((id) => !heldByKilled.has(id))).toEqual([]);
  });
});

describe("concurrency limits and the scheduler (pg driver)", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb("pg", 4);
  });
  afterAll(() => t.drop());

  it("starts no runner for jobs whose key has no free slot, and starts one once a slot frees", async () => {
    const serial = defineJob({ name: "serial", schema: payload, handler: () => {}, concurrency: { limit: 1, key: (p) => p.key } });
    const registry = createRegistry([serial]);
    await enqueueJobs(t, Array.from({ length: 30 }, (_, n) => job(serial, { key: "busy", n })));
    // The slot's holder runs under a runner the scheduler does not count on (one started elsewhere, or long gone).
    const [holder] = await claimJobs(t, { queue: serial.queue, runnerId: "elsewhere", limit: 5, maxLeaseMs: 60_000 });
    expect(holder).toBeDefined();
    const invoked: string[] = [];
    const invoke = async (runner: string) => void invoked.push(runner);
    for (let pass = 0; pass < 20; pass++) {
      expect(await schedulePass({ config, registry }, t.pool, t.schema, invoke)).toEqual({ ready: 0, invoked: 0, covered: false });
    }
    expect(invoked).toEqual([]);
    await completeJobs(t, [holder!]);
    expect(await schedulePass({ config, registry }, t.pool, t.schema, invoke)).toMatchObject({ ready: 29 });
    expect(invoked.length).toBeGreaterThan(0);
  });
});
