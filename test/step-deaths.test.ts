import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { rescueExpiredLeases } from "../shared/lifecycle/rescue.ts";
import { faultFree, pauseMs, STEPS, stepJob } from "./fixtures/step-jobs.ts";
import { createTestDb, databaseUrl, type TestDb } from "./support/db.ts";
import { startFleet } from "./support/worker-fleet.ts";

/**
 * Durable steps under runner deaths: worker processes run a three-step job
 * while the test SIGKILLs one at random every few hundred ms (landing before,
 * inside and after steps), the rescuer runs in a loop, and each step's side
 * effect is appended to an oracle file outside the database. Invariant 14:
 * a recorded step is never run again; only a step in flight at a death is.
 */

const SCRIPT = fileURLToPath(new URL("./fixtures/step-worker.ts", import.meta.url));
type Line = { e: "run" | "done"; job: string; step: string; run: string; pid: number; t: number };

describe("durable steps under SIGKILL", () => {
  let t: TestDb;
  let dir: string;
  beforeAll(async () => {
    t = await createTestDb("pg", 4);
    dir = mkdtempSync(join(tmpdir(), "step-deaths-"));
  });
  afterAll(async () => {
    await t.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("every job succeeds with the fault-free result, and each step's side effect repeats only after a death in it", { timeout: 120_000 }, async () => {
    const JOBS = 200;
    const type = stepJob("/dev/null", 0);
    const ids = (await enqueueJobs(t, Array.from({ length: JOBS }, (_, n) => job(type, { n })))).map((j) => j.id);
    const fleet = startFleet({ size: 3, dir, databaseUrl: databaseUrl(), schema: t.schema, slots: 4, idleMs: 1_500, restartDelayMs: 100, script: SCRIPT, maxSpawns: 200 });
    const killed = new Set<number>();
    const started = Date.now();
    let open = JOBS;
    // Kill a runner at random every 0.15 to 0.4 s, 20 times, while jobs are left.
    while (open > 0 && killed.size < 20 && Date.now() - started < 60_000) {
      await pauseMs(150 + Math.random() * 250);
      const victim = fleet.killOne();
      if (victim) killed.add(victim.pid);
      await rescueExpiredLeases(t);
      open = (await t.admin.query<{ n: number }>(`select count(*)::int as n from "${t.schema}".jobs where status <> 'succeeded'`)).rows[0]!.n;
      // Stop killing once few jobs are left, so the last ones finish.
      if (open < 10) break;
    }
    while (open > 0 && Date.now() - started < 100_000) {
      await pauseMs(200);
      await rescueExpiredLeases(t);
      open = (await t.admin.query<{ n: number }>(`select count(*)::int as n from "${t.schema}".jobs where status <> 'succeeded'`)).rows[0]!.n;
    }
    await fleet.stop(5_000);
    expect(open).toBe(0);

    // Every job succeeded, with the result a run without faults returns.
    const { rows: jobs } = await t.admin.query<{ id: string; payload: { n: number }; result: unknown }>(
      `select id::text, payload, result from "${t.schema}".jobs order by id`,
    );
    for (const j of jobs) expect(j.result).toEqual(faultFree(j.payload.n));

    const lines: Line[] = fleet.oracles().filter(existsSync)
      .flatMap((f) => readFileSync(f, "utf8").split("\n").filter(Boolean).flatMap((l) => { try { return [JSON.parse(l) as Line]; } catch { return []; } }))
      .sort((a, b) => a.t - b.t);
    const byJob = new Map<string, Line[]>(ids.map((id) => [id, []]));
    for (const l of lines) if (l.e === "run") byJob.get(l.job)!.push(l);

    let rerun = 0;
    for (const [id, runs] of byJob) {
      // In time order, with repeats of one step collapsed, the steps ran once each, in order: no recorded step ran again.
      const collapsed = runs.map((r) => r.step).filter((s, i, all) => i === 0 || all[i - 1] !== s);
      expect(collapsed, `job ${id}`).toEqual([...STEPS]);
      // Each repeat follows a run of the same step by a claim whose runner was killed, and that was that claim's last step.
      for (let i = 1; i < runs.length; i++) {
        if (runs[i]!.step !== runs[i - 1]!.step) continue;
        rerun++;
        const before = runs[i - 1]!;
        expect(killed.has(before.pid), `job ${id} step ${before.step} ran again after pid ${before.pid}, which was not killed`).toBe(true);
        expect(runs.slice(i).every((r) => r.run !== before.run), `job ${id}: the claim that died in ${before.step} ran on`).toBe(true);
      }
    }

    // Attempt rows and step records agree.
    const { rows: steps } = await t.admin.query<{ job_id: string; name: string; attempt: number }>(
      `select job_id::text, name, attempt from "${t.schema}".job_steps order by job_id, seq`,
    );
    expect(steps).toHaveLength(JOBS * STEPS.length);
    const { rows: attempts } = await t.admin.query<{ job_id: string; attempt: number; outcome: string; steps: { name: string; replayed: boolean }[] | null }>(
      `select job_id::text, attempt, outcome::text, steps from "${t.schema}".attempts`,
    );
    const attemptOf = new Map(attempts.map((a) => [`${a.job_id}/${a.attempt}`, a]));
    for (const s of steps) {
      const a = attemptOf.get(`${s.job_id}/${s.attempt}`);
      expect(a, `job ${s.job_id} step ${s.name}: attempt ${s.attempt} has a row`).toBeDefined();
      if (a!.steps) expect(a!.steps).toContainEqual(expect.objectContaining({ name: s.name, replayed: false }));
    }
    for (const a of attempts.filter((x) => x.outcome === "succeeded")) {
      const ranEarlier = steps.filter((s) => s.job_id === a.job_id && s.attempt < a.attempt).map((s) => s.name);
      expect(a.steps!.filter((x) => x.replayed).map((x) => x.name)).toEqual(ranEarlier);
    }
    console.log(`step deaths: ${JOBS} jobs, ${killed.size} runners killed, ${fleet.processes.length} spawned, ${rerun} in-flight steps ran again`);
    expect(killed.size).toBeGreaterThanOrEqual(4);
    expect(rerun).toBeGreaterThan(0);
  });
});
