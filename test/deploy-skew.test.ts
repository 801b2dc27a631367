/**
 * Deploy skew through the functions run for real: a job of a type the
 * deployed runners do not know (written by a newer deploy's enqueue) waits
 * uncharged, starts no runner, and shows as unserved in the API, the CLI and
 * the rescuer's metrics, until runners that know it are deployed.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../functions/api/app.ts";
import { generateToken } from "../functions/api/auth.ts";
import { enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { servingRules } from "../shared/settings/serving.ts";
import { quick, registry } from "./fixtures/e2e-jobs.ts";
import { createTestDb, databaseUrl, type TestDb } from "./support/db.ts";
import { emfDocs, startStack, until, type Stack } from "./support/stack.ts";

const WAKE = { source: "leasehold.wake" };
const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const BIN = fileURLToPath(new URL("../cli/bin.mjs", import.meta.url));
const config = {
  runners: { runner: { queues: ["default"], slots: 4, memoryMb: 256, timeoutSeconds: 20, maxLeaseMs: 5_000, idleMs: 400, maxConcurrency: 2 } },
  scheduler: { pollMs: 100, timeoutSeconds: 12 },
  wake: { precisionMs: 2_000, startLeadMs: 1_000, armSlackMs: 1_000 },
};

/** The deployment's config as an app's config file, for the CLI (`--config`). */
const configFile = join(mkdtempSync(join(tmpdir(), "leasehold-skew-")), "leasehold.config.ts");
writeFileSync(configFile, `export default ${JSON.stringify(config)};\n`);

/** `leasehold stats --json` with the deployment's config and the job types of `jobs`. */
const cliStats = (t: TestDb, jobs: string) =>
  new Promise<{ queue: string; ready: number; unserved: number }[]>((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, "stats", "--json", "--config", configFile, "--jobs", jobs], {
      env: { ...process.env, DATABASE_URL: databaseUrl(), LEASEHOLD_SCHEMA: t.schema },
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve(JSON.parse(out).queues) : reject(new Error(`stats exited ${code}`))));
  });

describe("a job of a type the deployed runners do not know", () => {
  let t: TestDb;
  let old: Stack;
  let oldClosed = false;
  let id: string;
  beforeAll(async () => {
    t = await createTestDb("pg");
    old = await startStack(config, { db: t, jobs: fixture("e2e-jobs.ts") });
    // As the next deploy's enqueue writes it, with work the old runners know beside it.
    const { rows } = await t.admin.query<{ id: string }>(
      `insert into "${t.schema}".jobs (queue, name, payload, max_attempts, lease_ms, backoff_ms)
       values ('default', 'e2e.next', '{"n":1}', 3, 2000, 0) returning id::text`,
    );
    id = rows[0]!.id;
    await enqueueJobs(t, Array.from({ length: 20 }, (_, n) => job(quick, { n })));
  });
  afterAll(async () => {
    if (!oldClosed) await old?.close();
    await t?.drop();
  });

  const row = async () =>
    (await t.admin.query(`select status::text, attempts, runs, last_error from "${t.schema}".jobs where id = $1`, [id])).rows[0];
  const attemptRows = async () =>
    (await t.admin.query(`select outcome::text from "${t.schema}".attempts where job_id = $1`, [id])).rows;

  it("stays queued with no attempt while old runners come and go, and starts no runner of its own", async () => {
    await until(async () => {
      const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where name = 'e2e.quick' and status = 'succeeded'`);
      if (rows[0]!.n === 20) return true;
      await old.invoke("scheduler", WAKE);
      return false;
    }, 30_000, "the known jobs to run");
    await old.runtime.idle();
    const started = old.runtime.stats().runner!.invocations;
    expect(started).toBeGreaterThan(0);
    // A cron-style scheduler run and wake-ups: with only the unknown job left, nothing is demand.
    const cron = await old.invoke<{ passes: number; invoked: number }>("scheduler", {});
    expect(cron.invoked).toBe(0);
    for (let n = 0; n < 10; n++) expect(await old.invoke<{ invoked: number }>("scheduler", WAKE)).toMatchObject({ invoked: 0 });
    // A runner started anyway (as for other work) leaves it alone.
    await old.invoke("runner", {});
    await old.invoke("rescuer");
    await old.runtime.idle();
    expect(old.runtime.stats().runner!.invocations).toBe(started + 1);
    expect(await row()).toEqual({ status: "queued", attempts: 0, runs: 0, last_error: null });
    expect(await attemptRows()).toEqual([]);
  });

  it("shows as unserved in the API, the CLI and the rescuer's metrics", async () => {
    const token = generateToken();
    const api = createApp({ store: t, registry, token, serving: servingRules(old.config) });
    const res = await api.request("/v1/queues", { headers: { authorization: `Bearer ${token}` } });
    const { queues } = (await res.json()) as { queues: { queue: string; ready: number; unserved: number }[] };
    expect(queues.find((q) => q.queue === "default")).toMatchObject({ ready: 1, unserved: 1 });

    expect((await cliStats(t, fixture("e2e-jobs.ts"))).find((q) => q.queue === "default")).toMatchObject({ ready: 1, unserved: 1 });
    expect((await cliStats(t, fixture("e2e-jobs-next.ts"))).find((q) => q.queue === "default")).toMatchObject({ ready: 1, unserved: 0 });

    expect(await old.invoke("rescuer")).toMatchObject({ unserved: 1 });
    expect(emfDocs(old, "UnservedJobs", "rescuer").at(-1)).toMatchObject({ UnservedJobs: 1, service: "leasehold" });
    expect(emfDocs(old, "JobsUnserved", "rescuer").filter((d) => d.queue === "default").at(-1)).toMatchObject({ JobsUnserved: 1 });
  });

  it("runs to success once runners that know it are deployed", async () => {
    await old.close();
    oldClosed = true;
    const next = await startStack(config, { db: t, jobs: fixture("e2e-jobs-next.ts") });
    try {
      await until(async () => {
        if ((await row())!.status === "succeeded") return true;
        await next.invoke("scheduler", WAKE);
        return false;
      }, 20_000, "the new type to run");
      expect(await row()).toMatchObject({ status: "succeeded", attempts: 1 });
      expect(await attemptRows()).toEqual([{ outcome: "succeeded" }]);
      expect(await next.invoke("rescuer")).toMatchObject({ unserved: 0 });
    } finally {
      await next.close();
    }
  });
});
