/**
 * Every way a job dies, through the functions run for real by the local
 * Lambda runtime: each ends `dead`, adds exactly 1 to DeadJobs (read from
 * the EMF the functions print) and writes exactly one "job dead" line with
 * the reason of each attempt.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { enqueue } from "../shared/jobs/enqueue.ts";
import type { JobType } from "../shared/jobs/job.ts";
import { killer, refused, reshaped, slow, throws } from "./fixtures/e2e-jobs.ts";
import { emfDocs, logLines, startStack, until, type Stack } from "./support/stack.ts";

const WAKE = { source: "leasehold.wake" };
/** `reshaped` as an older deploy defined it: its payloads no longer fit today's schema. */
const reshapedBefore = { ...reshaped, schema: z.object({}) } as JobType;

describe("a job's death, whichever way it dies", () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({
      runners: { runner: { queues: ["default"], slots: 4, memoryMb: 256, timeoutSeconds: 20, maxLeaseMs: 5_000, idleMs: 500, maxConcurrency: 2 } },
      scheduler: { pollMs: 200, timeoutSeconds: 12 },
      wake: { precisionMs: 2_000, startLeadMs: 1_000, armSlackMs: 1_000 },
    });
  });
  afterAll(() => s.close());

  const status = async (id: string) =>
    (await s.t.admin.query<{ status: string }>(`select status::text from "${s.t.schema}".jobs where id = $1`, [id])).rows[0]!.status;
  /** Every DeadJobs value any function published, summed. */
  const deadJobs = () => emfDocs(s, "DeadJobs").reduce((n, doc) => n + (doc.DeadJobs as number), 0);

  it.each<[string, JobType, RegExp[]]>([
    ["throws on every attempt", throws, [/^failed: Error: broken on attempt 1/, /^failed: Error: broken on attempt 2/]],
    ["times out on every attempt", slow, [/^timeout: /, /^timeout: /]],
    ["is failed for good by its handler", refused, [/^failed: PermanentError: the account is closed/]],
    // One attempt of its three: a payload that fails its schema is a permanent failure.
    ["no longer fits its schema when it runs", reshapedBefore, [/^failed: payload does not match the schema of e2e\.reshaped: /]],
    // Its first death may come before the runner recorded the start: that
    // attempt is given back (released), and the next deaths are charged.
    ["kills its runner", killer, [/^(released|lease_expired): runner .* (died with no start on record|did not settle by)/]],
  ])("a job that %s ends dead, adds 1 to DeadJobs and writes one \"job dead\" line with its reasons", async (_what, type, reasons) => {
    const before = deadJobs();
    const { id } = await enqueue(s.t, type, {});
    await until(async () => {
      if ((await status(id)) === "dead") return true;
      await s.invoke("rescuer");
      await s.invoke("scheduler", WAKE);
      return false;
    }, 40_000, `${type.name} to die`);
    await s.runtime.idle();
    await s.invoke("rescuer"); // publishes DeadJobs 0: nothing dies twice
    expect(deadJobs() - before).toBe(1);

    const lines = logLines(s, "job dead").filter((l) => l.jobId === id);
    expect(lines).toHaveLength(1);
    const line = lines[0]! as { name: string; queue: string; reasons: string[]; attempts: number };
    expect(line).toMatchObject({ name: type.name, queue: "default" });
    if (type === killer) {
      expect(line.reasons.length).toBeGreaterThanOrEqual(2);
      for (const reason of line.reasons) expect(reason).toMatch(reasons[0]!);
      expect(line.reasons.at(-1)).toMatch(/^lease_expired: /);
      expect(line.attempts).toBe(killer.maxAttempts);
    } else {
      expect(line.reasons).toHaveLength(reasons.length);
      line.reasons.forEach((reason, i) => expect(reason).toMatch(reasons[i]!));
    }
  }, 60_000);
});
