import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvokeCommand } from "@aws-sdk/client-lambda";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { blocker, hog, quick, stubborn } from "./fixtures/e2e-jobs.ts";
import { emfDocs, startStack, until, type Stack } from "./support/stack.ts";
import { alarmSpecs } from "../infra/alarm-specs.ts";

const WAKE = { source: "leasehold.wake" };

/** The EMF metric values a function printed, by metric name. */
function emfValues(stack: Stack, fn: string, metric: string): number[] {
  return emfDocs(stack, metric, fn).map((doc) => doc[metric] as number);
}

describe("the functions, run for real by the local Lambda runtime", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({
      runners: { runner: { queues: ["default"], slots: 10, memoryMb: 256, timeoutSeconds: 20, maxLeaseMs: 5_000, idleMs: 700, maxConcurrency: 4 } },
      scheduler: { pollMs: 200, timeoutSeconds: 12 },
      wake: { precisionMs: 2_000, startLeadMs: 1_000, armSlackMs: 1_000 },
    });
  });
  afterAll(() => s.close());

  const count = async (where: string, values: unknown[] = []) =>
    (await s.t.admin.query<{ n: number }>(`select count(*)::int as n from "${s.t.schema}".jobs where ${where}`, values)).rows[0]!.n;
  const attempts = async (id: string) =>
    (await s.t.admin.query<any>(`select * from "${s.t.schema}".attempts where job_id = $1 order by ended_at, attempt`, [id])).rows;
  /** Runs the rescuer and wakes the scheduler until `done`, as the crons and enqueues would. */
  const drive = async (done: () => Promise<boolean>, timeoutMs: number, what: string) =>
    until(async () => {
      if (await done()) return true;
      await s.invoke("rescuer");
      await s.invoke("scheduler", WAKE);
      return false;
    }, timeoutMs, what);

  it("1,000 jobs fan out through the real SDK client and each runs exactly once, in fewer invocations than jobs", async () => {
    await enqueueJobs(s.t, Array.from({ length: 1_000 }, (_, n) => job(quick, { n })));
    await drive(async () => (await count("name = 'e2e.quick' and status = 'succeeded'")) === 1_000, 60_000, "1,000 successes");
    const { rows } = await s.t.admin.query<{ n: number; jobs: number; firsts: number }>(
      `select count(*)::int as n, count(distinct job_id)::int as jobs, count(*) filter (where attempt = 1 and outcome = 'succeeded')::int as firsts
       from "${s.t.schema}".attempts a join "${s.t.schema}".jobs j on j.id = a.job_id where j.name = 'e2e.quick'`,
    );
    expect(rows[0]).toEqual({ n: 1_000, jobs: 1_000, firsts: 1_000 });
    await s.runtime.idle();
    const runner = s.runtime.stats().runner!;
    expect(runner.invocations).toBeGreaterThan(0);
    expect(runner.invocations).toBeLessThan(1_000);
    expect(runner.peakConcurrency).toBeLessThanOrEqual(4);
  });

  it("a runner killed mid-job: the job is rescued at its lease's expiry and succeeds next time; the first attempt names the killed runner", async () => {
    const { id } = await enqueue(s.t, blocker, {});
    // Asynchronously, as an enqueue wakes it: the scheduler then watches the lease.
    await s.lambda.send(new InvokeCommand({ FunctionName: "scheduler", InvocationType: "Event", Payload: JSON.stringify(WAKE) }));
    // Mid-job: its runner has recorded that the handler started (one write
    // after the start), so the death charges the attempt.
    const holder = await until(async () => {
      const { rows } = await s.t.admin.query<{ runner_id: string }>(
        `select runner_id from "${s.t.schema}".jobs where id = $1 and status = 'running' and handler_started`, [id]);
      return rows[0]?.runner_id;
    }, 20_000, "the blocker to start");
    const victim = await until(async () => s.runtime.inflight().find((i) => i.requestId === holder), 5_000, "the runner process");
    process.kill(victim.pid, "SIGKILL");
    // No rescuer call: the watching scheduler rescues the job when its lease runs out.
    await until(async () => (await count("id = $1 and status = 'succeeded'", [id])) === 1, 20_000, "the retry, unprompted");
    await drive(async () => (await count("id = $1 and status = 'succeeded'", [id])) === 1, 20_000, "the retry");
    expect((await attempts(id)).map((a) => [a.attempt, a.outcome, a.runner_id === holder])).toEqual([
      [1, "lease_expired", true],
      [2, "succeeded", false],
    ]);
  });

  it("a job that exhausts its runner's memory starts exactly 3 times, ends dead, and 200 jobs beside it succeed", async () => {
    const { id } = await enqueue(s.t, hog, {});
    await enqueueJobs(s.t, Array.from({ length: 200 }, (_, n) => job(quick, { n }, { group: "beside-hog" })));
    const oomBefore = s.runtime.stats().runner?.outOfMemory ?? 0;
    await drive(async () => (await count("id = $1 and status = 'dead'", [id])) === 1, 90_000, "the hog to die three times");
    await drive(async () => (await count("group_key = 'beside-hog' and status = 'succeeded'")) === 200, 60_000, "the 200 jobs");
    const history = await attempts(id);
    // A hog that blocks its event loop may die before its runner records its
    // start: that death is given back (at most once), and charged with the next.
    expect(history.at(-1)!.outcome).toBe("lease_expired");
    expect(history.filter((a) => a.outcome === "released").length).toBeLessThanOrEqual(1);
    expect(history.filter((a) => a.outcome !== "released").every((a) => a.outcome === "lease_expired")).toBe(true);
    expect(history.map((a) => a.attempt)).toEqual([1, 2, 3]);
    expect(await s.t.admin.query(`select attempts from "${s.t.schema}".jobs where id = $1`, [id]).then((r) => r.rows[0])).toEqual({ attempts: 3 });
    expect(new Set(history.map((a) => a.runner_id)).size).toBe(3);
    // The third death is recorded at its lease's expiry; its process may die of its memory just after.
    await until(async () => s.runtime.stats().runner!.outOfMemory - oomBefore >= 3, 20_000, "the third OOM kill");
    // Deaths are reported by whichever function rescued them: the scheduler at the lease's expiry, or the rescuer.
    expect([...emfValues(s, "rescuer", "DeadJobs"), ...emfValues(s, "scheduler", "DeadJobs")]).toContain(1);
    expect(await count("group_key = 'beside-hog' and status <> 'succeeded'")).toBe(0);
    const { rows } = await s.t.admin.query<{ n: number }>(
      `select count(*)::int as n from "${s.t.schema}".attempts a join "${s.t.schema}".jobs j on j.id = a.job_id
       where j.group_key = 'beside-hog' and a.outcome = 'succeeded'`);
    expect(rows[0]!.n).toBe(200); // each succeeded exactly once
  }, 180_000);

  it("the rescuer's EMF output is exactly what the alarms watch: namespace, metric and dimensions", () => {
    const docs = s.logs
      .filter((l) => l.fn === "rescuer" && l.line.includes('"_aws"'))
      .map((l) => JSON.parse(l.line) as { _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[] } } & Record<string, unknown>);
    for (const name of ["DeadJobs", "OldestReadyAgeSeconds", "UnservedJobs"]) {
      const alarm = alarmSpecs(s.config).find((a) => a.metricName === name)!;
      const doc = docs.find((d) => d._aws.CloudWatchMetrics[0]!.Metrics.some((m) => m.Name === name) &&
        Object.entries(alarm.dimensions).every(([k, v]) => d[k] === v))!;
      expect(doc, `an EMF line with ${name}`).toBeDefined();
      const directive = doc._aws.CloudWatchMetrics[0]!;
      expect(directive.Namespace).toBe(alarm.namespace);
      expect(directive.Dimensions).toEqual([Object.keys(alarm.dimensions)]);
      for (const [k, v] of Object.entries(alarm.dimensions)) expect(doc[k]).toBe(v);
    }
  });

  it("a handler that overruns its lease, ignoring its AbortSignal, is recorded timeout every time, never a late success", async () => {
    const { id } = await enqueue(s.t, stubborn, {});
    await drive(async () => (await count("id = $1 and status = 'dead'", [id])) === 1, 30_000, "the stubborn job to run out of attempts");
    await new Promise((r) => setTimeout(r, 2_000)); // past any late finish
    const history = await attempts(id);
    expect(history).toHaveLength(2);
    expect(history.map((a) => a.attempt)).toEqual([1, 2]);
    // Aborted a settle margin before the deadline, so the timeout is written
    // while the lease still holds: never left for the rescuer.
    expect(history.map((a) => a.outcome)).toEqual(["timeout", "timeout"]);
    expect(await count("id = $1 and status = 'dead'", [id])).toBe(1);
  });
});

describe("the scheduler under a burst of demand", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({
      runners: { runner: { queues: ["default"], slots: 5, memoryMb: 256, timeoutSeconds: 20, maxLeaseMs: 5_000, idleMs: 500, maxConcurrency: 2 } },
      scheduler: { pollMs: 100, timeoutSeconds: 12 },
      wake: { precisionMs: 2_000, startLeadMs: 1_000, armSlackMs: 1_000 },
    });
  });
  afterAll(() => s.close());

  it("returns early when there is nothing to do, instead of polling through its timeout", async () => {
    await s.invoke("scheduler", {}); // a cold start's module load is not what this measures
    const started = Date.now();
    const idle = await s.invoke<{ passes: number; invoked: number }>("scheduler", {});
    expect(idle).toEqual({ passes: 1, invoked: 0, invokeFailures: 0, plan: "idle" });
    expect(Date.now() - started).toBeLessThan(s.config.scheduler.timeoutSeconds * 1000 / 2);
  });

  it("never starts more runners than its maximum, whatever the backlog and however many schedulers run", async () => {
    await enqueueJobs(s.t, Array.from({ length: 600 }, (_, n) => job(quick, { n })));
    // One cron-style scheduler polling for seconds, and wake-ups on top of it.
    const cron = s.invoke<{ passes: number; invoked: number }>("scheduler", {});
    const wakes = await Promise.all(Array.from({ length: 6 }, () => s.invoke<{ invoked: number }>("scheduler", WAKE)));
    const polled = await cron;
    // It polled more than once while the wake-ups ran (how many times depends on the host's speed: 5 was missed under load).
    expect(polled.passes).toBeGreaterThan(1);
    await until(async () => {
      const { rows } = await s.t.admin.query<{ n: number }>(`select count(*)::int as n from "${s.t.schema}".jobs where status = 'succeeded'`);
      if (rows[0]!.n === 600) return true;
      await s.invoke("scheduler", WAKE);
      return false;
    }, 60_000, "600 successes");
    await s.runtime.idle();
    const runner = s.runtime.stats().runner!;
    expect(runner.peakConcurrency).toBeLessThanOrEqual(2);
    expect(runner.peakConcurrency).toBeGreaterThanOrEqual(1);
    expect(polled.invoked + wakes.reduce((n, w) => n + w.invoked, 0)).toBeGreaterThanOrEqual(1);
  });
});
