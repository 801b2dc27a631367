import { spawn } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getJob } from "../shared/observe/admin.ts";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { enqueue, enqueueJobs, job } from "../shared/jobs/enqueue.ts";
import { defineJob } from "../shared/jobs/job.ts";
import * as z from "zod";
import { failJobs, settleJobs } from "../shared/lifecycle/settle.ts";
import { createTestDb, databaseUrl, type TestDb } from "./support/db.ts";
import { noop } from "./support/jobs.ts";
import { sendWelcomeEmail } from "../jobs/index.ts";

const BIN = fileURLToPath(new URL("../cli/bin.mjs", import.meta.url));
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const JOBS = fileURLToPath(new URL("../jobs/index.ts", import.meta.url));
const NOOP = fileURLToPath(new URL("./support/jobs.ts", import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  json: any;
}

describe("the leasehold CLI", () => {
  let t: TestDb;
  let tmp: string;
  beforeAll(async () => {
    t = await createTestDb("pg");
    tmp = mkdtempSync(join(tmpdir(), "leasehold-cli-"));
  });
  afterAll(async () => {
    rmSync(tmp, { recursive: true, force: true });
    await t.drop();
  });

  /** Runs `node cli/bin.mjs ...args` against the test schema, the way a user would. */
  const cli = (args: string[], options: { env?: Record<string, string>; cwd?: string; input?: string } = {}) =>
    new Promise<Run>((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], {
        // In the app's directory (this repository's own app: leasehold.config.ts, jobs/index.ts).
        cwd: options.cwd ?? ROOT,
        // No dev stack's state (one may run in this checkout): the help shows the fixed default.
        env: { ...process.env, DATABASE_URL: databaseUrl(), LEASEHOLD_SCHEMA: t.schema, LEASEHOLD_DEV_PG_PORT: "", LEASEHOLD_DEV_DATA_DIR: join(tmp, "no-dev-stack", "pg"), ...options.env },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      child.on("error", reject);
      child.on("close", (code) => {
        let json: unknown;
        try {
          json = JSON.parse(stdout);
        } catch {
          json = undefined;
        }
        resolve({ code, stdout, stderr, json });
      });
      child.stdin.end(options.input ?? "");
    });

  const countJobs = async () =>
    (await t.admin.query<{ n: number }>(`select count(*)::int as n from "${t.schema}".jobs`)).rows[0]!.n;

  const killOne = async (queue: string, error = "kaput") => {
    const { id } = await enqueue(t, noop, { n: 0 }, { queue, maxAttempts: 1 });
    const [c] = await claimJobs(t, { queue, runnerId: "runner-1", limit: 1, maxLeaseMs: 60_000 });
    await failJobs(t, [{ ...c!, outcome: "failed", error, retryDelayMs: 0 }]);
    return id;
  };

  it("prints help, and refuses no command, unknown commands and unknown options with 2", async () => {
    const [help, enqueueHelp, none, unknown, badOption] = await Promise.all([
      cli(["--help"]),
      cli(["enqueue", "--help"]),
      cli([]),
      cli(["frobnicate"]),
      cli(["jobs", "--bogus"]),
    ]);
    expect(help.code).toBe(0);
    for (const name of ["migrate", "enqueue", "jobs", "job", "retry", "cancel", "stats", "prune"]) expect(help.stdout).toContain(`  ${name} `);
    expect(help.stdout).toContain("postgres://postgres:***@127.0.0.1:54329/postgres");
    expect(help.stdout).toMatch(/3 job not found, 4 conflict/);
    expect(enqueueHelp.code).toBe(0);
    expect(enqueueHelp.stdout).toContain("--dedupe-key");
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("Commands:");
    expect(unknown).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown command "frobnicate"') });
    expect(badOption).toMatchObject({ code: 2, stderr: expect.stringContaining("--bogus") });
  });

  it("migrates a fresh schema, then finds nothing to do", async () => {
    const schema = `${t.schema}_m`;
    try {
      const first = await cli(["migrate", "--schema", schema, "--json"]);
      expect(first.code).toBe(0);
      expect(first.json).toEqual({ schema, applied: expect.arrayContaining([1, 2]) });
      const again = await cli(["migrate", "--schema", schema]);
      expect(again).toMatchObject({ code: 0, stdout: `schema ${schema} is up to date\n` });
    } finally {
      await t.admin.query(`drop schema if exists "${schema}" cascade`);
    }
  });

  it("enqueues a job with its options, and from stdin", async () => {
    const [withOptions, plain, fromStdin] = await Promise.all([
      cli(["enqueue", "report.generate", '{"reportId":"r1"}', "--queue", "cpu", "--delay", "30s", "--priority", "7",
        "--max-attempts", "2", "--dedupe-key", "r1", "--json"]),
      cli(["enqueue", "email.welcome", '{"to":"ada@example.com","name":"Ada"}']),
      cli(["enqueue", "email.welcome", "-", "--json"], { input: '{"to":"bob@example.com","name":"Bob"}' }),
    ]);
    expect(withOptions.code).toBe(0);
    expect(withOptions.json).toMatchObject({ name: "report.generate", queue: "cpu", priority: 7, maxAttempts: 2, dedupeKey: "r1", existing: false });
    const stored = (await getJob(t, withOptions.json.id))!;
    expect(stored.runAt.getTime() - stored.createdAt.getTime()).toBeGreaterThanOrEqual(29_000);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toMatch(/^enqueued job \d+: email\.welcome on queue default/);
    expect(fromStdin.json).toMatchObject({ payload: { to: "bob@example.com", name: "Bob" } });

    const duplicate = await cli(["enqueue", "report.generate", '{"reportId":"r2"}', "--dedupe-key", "r1", "--json"]);
    expect(duplicate.json).toMatchObject({ id: withOptions.json.id, existing: true });
  });

  it("debounces and throttles by key: the same job back, marked, with the last payload (debounce) or the first (throttle)", async () => {
    const welcome = (to: string) => JSON.stringify({ to, name: "Ada" });
    const debounce = ["--debounce", "cli-d", "--debounce-period", "30s", "--debounce-max-wait", "5m", "--json"];
    const first = await cli(["enqueue", "email.welcome", welcome("a@example.com"), ...debounce]);
    const second = await cli(["enqueue", "email.welcome", welcome("b@example.com"), ...debounce.slice(0, -1)]);
    expect(first.json).toMatchObject({ existing: false, payload: { to: "a@example.com" } });
    expect(second).toMatchObject({ code: 0, stdout: expect.stringMatching(new RegExp(`^debounced into job ${first.json.id} \\(email\\.welcome\\)`)) });
    const stored = (await getJob(t, first.json.id))!;
    expect(stored.payload).toEqual({ to: "b@example.com", name: "Ada" });
    expect(stored.runAt.getTime() - stored.createdAt.getTime()).toBeGreaterThanOrEqual(30_000);

    const throttle = ["--throttle", "cli-t", "--throttle-period", "10m", "--json"];
    const kept = await cli(["enqueue", "email.welcome", welcome("c@example.com"), ...throttle]);
    const dropped = await cli(["enqueue", "email.welcome", welcome("d@example.com"), ...throttle]);
    expect(dropped.json).toMatchObject({ id: kept.json.id, existing: true, throttled: true, payload: { to: "c@example.com" } });
  });

  it("refuses a debounce or throttle flag without its partner, or out of bounds, with 2, naming the flag, and writes nothing", async () => {
    const before = await countJobs();
    const welcome = JSON.stringify({ to: "ada@example.com", name: "Ada" });
    const [noPeriod, noKey, shortWait, withDelay, withDedupe, badPeriod] = await Promise.all([
      cli(["enqueue", "email.welcome", welcome, "--debounce", "k"]),
      cli(["enqueue", "email.welcome", welcome, "--throttle-period", "5s"]),
      cli(["enqueue", "email.welcome", welcome, "--debounce", "k", "--debounce-period", "10s", "--debounce-max-wait", "5s"]),
      cli(["enqueue", "email.welcome", welcome, "--debounce", "k", "--debounce-period", "10s", "--delay", "5s"]),
      cli(["enqueue", "email.welcome", welcome, "--throttle", "k", "--throttle-period", "10s", "--dedupe-key", "k"]),
      cli(["enqueue", "email.welcome", welcome, "--throttle", "k", "--throttle-period", "0s"]),
    ]);
    expect(noPeriod).toMatchObject({ code: 2, stderr: expect.stringContaining("--debounce needs --debounce-period") });
    expect(noKey).toMatchObject({ code: 2, stderr: expect.stringContaining("--throttle-period needs --throttle") });
    expect(shortWait).toMatchObject({ code: 2, stderr: expect.stringContaining("--debounce-max-wait: must be at least periodMs") });
    expect(withDelay).toMatchObject({ code: 2, stderr: expect.stringContaining("--delay: a debounced job starts periodMs after its last enqueue") });
    expect(withDedupe).toMatchObject({ code: 2, stderr: expect.stringContaining("--dedupe-key: a throttled job cannot also have a dedupe key") });
    expect(badPeriod).toMatchObject({ code: 2, stderr: expect.stringContaining("--throttle-period:") });
    expect(await countJobs()).toBe(before);
  });

  it("takes a job's own rate limit key with --rate-key (and --rate-limit, --rate-period), refused for a type without a rate limit", async () => {
    const zod = pathToFileURL(createRequire(import.meta.url).resolve("zod")).href;
    const core = new URL("../shared/jobs/job.ts", import.meta.url).href;
    writeFileSync(join(tmp, "rated-jobs.ts"), `import { z } from ${JSON.stringify(zod)};
import { createRegistry, defineJob } from ${JSON.stringify(core)};
export const registry = createRegistry([
  defineJob({ name: "partner.call", schema: z.object({}), handler: () => {}, rateLimit: { limit: 5, periodMs: 1000 } }),
  defineJob({ name: "plain.call", schema: z.object({}), handler: () => {} }),
]);\n`);
    const before = await countJobs();
    const [plainRefused, noKey] = await Promise.all([
      cli(["enqueue", "plain.call", "{}", "--jobs", "rated-jobs.ts", "--rate-key", "acct-1"], { cwd: tmp }),
      cli(["enqueue", "partner.call", "{}", "--jobs", "rated-jobs.ts", "--rate-limit", "2"], { cwd: tmp }),
    ]);
    expect(plainRefused).toMatchObject({ code: 2, stderr: expect.stringContaining("--rate-key: job type plain.call declares no rateLimit") });
    expect(noKey).toMatchObject({ code: 2, stderr: expect.stringContaining("--rate-limit needs --rate-key") });
    expect(await countJobs()).toBe(before);
    const ok = await cli(["enqueue", "partner.call", "{}", "--jobs", "rated-jobs.ts", "--rate-key", "acct-1", "--rate-limit", "2", "--rate-period", "1m", "--json"], { cwd: tmp });
    expect(ok.code).toBe(0);
    const { rows } = await t.admin.query(`select rate_key, rate_limit, rate_period_ms from "${t.schema}".jobs where id = $1`, [ok.json.id]);
    expect(rows).toEqual([{ rate_key: "acct-1", rate_limit: 2, rate_period_ms: 60_000 }]);
  });

  it("wakes the scheduler after an enqueue commits, with an asynchronous Invoke, and not for a pending duplicate", async () => {
    const invokes: { path: string; type: unknown; body: string }[] = [];
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        invokes.push({ path: req.url ?? "", type: req.headers["x-amz-invocation-type"], body });
        res.writeHead(202).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const env = {
        LEASEHOLD_SCHEDULER_FUNCTION: "scheduler", AWS_ENDPOINT_URL_LAMBDA: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        AWS_REGION: "us-east-1", AWS_ACCESS_KEY_ID: "local", AWS_SECRET_ACCESS_KEY: "local",
      };
      const first = await cli(["enqueue", "email.welcome", '{"to":"cy@example.com","name":"Cy"}', "--dedupe-key", "wake-1"], { env });
      const again = await cli(["enqueue", "email.welcome", '{"to":"cy@example.com","name":"Cy"}', "--dedupe-key", "wake-1"], { env });
      expect([first.code, again.code]).toEqual([0, 0]);
      expect(invokes).toEqual([{ path: "/2015-03-31/functions/scheduler/invocations", type: "Event", body: '{"source":"leasehold.wake"}' }]);
    } finally {
      server.close();
    }
  });

  describe("waking the scheduler, wherever it runs", () => {
    /** A stand-in for the Lambda Invoke API: records each Invoke. */
    const invokes: { path: string; type: unknown; body: string }[] = [];
    let lambdaUrl = "";
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        invokes.push({ path: req.url ?? "", type: req.headers["x-amz-invocation-type"], body });
        res.writeHead(202).end();
      });
    });
    beforeAll(async () => {
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      lambdaUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(() => void server.close());
    // NODE_NO_WARNINGS: on Node 20 the AWS SDK warns of its end of support on stderr, which these tests read.
    const aws = () => ({ NODE_NO_WARNINGS: "1", AWS_ENDPOINT_URL_LAMBDA: lambdaUrl, AWS_REGION: "us-east-1", AWS_ACCESS_KEY_ID: "local", AWS_SECRET_ACCESS_KEY: "local" });
    const invoked = (fn: string) => ({ path: `/2015-03-31/functions/${fn}/invocations`, type: "Event", body: '{"source":"leasehold.wake"}' });

    it("the dev stack's, found through its .dev-data/stack.json when the database is its own: enqueue, retry and `wake`", async () => {
      const app = mkdtempSync(join(tmp, "dev-app-"));
      mkdirSync(join(app, ".dev-data"));
      // As `leasehold dev` writes it (this process stands in for the stack's; nothing set by hand).
      const state = { pid: process.pid, apiUrl: "http://127.0.0.1:1", lambdaUrl, databaseUrl: databaseUrl(), schema: t.schema, wsProxy: "127.0.0.1:1", schedulerFunction: "scheduler", env: {} };
      writeFileSync(join(app, ".dev-data", "stack.json"), JSON.stringify(state));
      const env = { NODE_NO_WARNINGS: "1", LEASEHOLD_DEV_DATA_DIR: "", LEASEHOLD_SCHEDULER_FUNCTION: "", AWS_ENDPOINT_URL_LAMBDA: "", DATABASE_URL: "" };
      const jobs = ["--jobs", JOBS];
      invokes.length = 0;
      const enqueued = await cli(["enqueue", "email.welcome", '{"to":"dev@example.com","name":"Dev"}', ...jobs, "--json"], { env, cwd: app });
      expect(enqueued).toMatchObject({ code: 0, stderr: "" });
      const dead = await killOne("dev-wake");
      const retried = await cli(["retry", dead, ...jobs], { env, cwd: app });
      expect(retried).toMatchObject({ code: 0, stderr: "" });
      const woken = await cli(["wake", ...jobs], { env, cwd: app });
      expect(woken).toMatchObject({ code: 0, stdout: `woke the dev stack's scheduler (${lambdaUrl})\n` });
      expect(invokes).toEqual([invoked("scheduler"), invoked("scheduler"), invoked("scheduler")]);

      // Another database than the stack's: its scheduler is not woken, and the CLI says why.
      const elsewhere = await cli(["wake", ...jobs], { env: { ...env, DATABASE_URL: "postgres://u:p@127.0.0.1:1/other" }, cwd: app });
      expect(elsewhere).toMatchObject({ code: 1, stderr: expect.stringContaining("no scheduler to wake: the dev stack running here uses another database") });
      expect(invokes).toHaveLength(3);
    });

    it("a deployed stage's, named from sst.config.ts's app name with --stage; a bad --stage changes nothing", async () => {
      const app = mkdtempSync(join(tmp, "deployed-app-"));
      writeFileSync(join(app, "sst.config.ts"), 'export default $config({ app(input) { return { name: "acme", home: "aws", removal: input?.stage === "production" ? "retain" : "remove" }; }, async run() {} });\n');
      const env = { ...aws(), LEASEHOLD_SCHEDULER_FUNCTION: "" };
      invokes.length = 0;
      const before = await countJobs();
      const enqueued = await cli(["enqueue", "email.welcome", '{"to":"prod@example.com","name":"P"}', "--jobs", JOBS, "--stage", "production"], { env, cwd: app });
      expect(enqueued).toMatchObject({ code: 0, stderr: "" });
      expect(invokes).toEqual([invoked("acme-production-Scheduler")]);
      const noConfig = await cli(["enqueue", "email.welcome", '{"to":"prod@example.com","name":"P"}', "--jobs", JOBS, "--stage", "production"], { env, cwd: tmp });
      const badStage = await cli(["retry", "--all-dead", "--jobs", JOBS, "--stage", "no/such"], { env, cwd: app });
      expect(noConfig).toMatchObject({ code: 2, stderr: expect.stringContaining("--stage: no sst.config.ts in") });
      expect(badStage).toMatchObject({ code: 2, stderr: expect.stringContaining("--stage must be an SST stage name") });
      expect(await countJobs()).toBe(before + 1);
    });

    it("says plainly when the Invoke fails, and still exits 0: the job is committed", async () => {
      const env = { NODE_NO_WARNINGS: "1", LEASEHOLD_SCHEDULER_FUNCTION: "scheduler", AWS_ENDPOINT_URL_LAMBDA: "http://127.0.0.1:1", AWS_REGION: "us-east-1", AWS_ACCESS_KEY_ID: "local", AWS_SECRET_ACCESS_KEY: "local" };
      const enqueued = await cli(["enqueue", "email.welcome", '{"to":"lost@example.com","name":"L"}'], { env });
      expect(enqueued.code).toBe(0);
      expect(enqueued.stderr).toMatch(/^warning: could not wake scheduler \(LEASEHOLD_SCHEDULER_FUNCTION\): .+; the job starts at the scheduler's next wake-up\n$/);
    });
  });

  it("lists the recurring jobs of --jobs with their cron, time zone and next run", async () => {
    const [human, json] = await Promise.all([cli(["recurring"]), cli(["recurring", "--json"])]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^NAME +JOB +CRON +TIME ZONE +MISSED +LAST TICK +NEXT RUN\nreport\.daily +report\.generate +0 6 \* \* \* +Europe\/Paris +skip +- +\d{4}-/);
    expect(json.json.recurring).toEqual([expect.objectContaining({ name: "report.daily", cron: "0 6 * * *", timeZone: "Europe/Paris", lastTickAt: null })]);
    expect(new Date(json.json.recurring[0].nextRunAt).getUTCMinutes()).toBe(0);
  });

  it("refuses a bad payload with 2, naming the field, and writes nothing", async () => {
    const before = await countJobs();
    const [human, json, unknownType, notJson, badPriority, badDelay, badQueue, unservedQueue] = await Promise.all([
      cli(["enqueue", "email.welcome", '{"to":"not-an-email","name":"Ada"}']),
      cli(["enqueue", "email.welcome", '{"to":"ada@example.com"}', "--json"]),
      cli(["enqueue", "email.goodbye", "{}"]),
      cli(["enqueue", "email.welcome", "{to:"]),
      cli(["enqueue", "email.welcome", '{"to":"ada@example.com","name":"Ada"}', "--priority", "99999"]),
      cli(["enqueue", "email.welcome", '{"to":"ada@example.com","name":"Ada"}', "--delay", "30"]),
      cli(["enqueue", "email.welcome", '{"to":"ada@example.com","name":"Ada"}', "--queue", ""]),
      cli(["enqueue", "email.welcome", '{"to":"ada@example.com","name":"Ada"}', "--queue", "reports"]),
    ]);
    expect(human.code).toBe(2);
    expect(human.stderr).toContain("payload.to: Invalid email address");
    expect(json.code).toBe(2);
    expect(json.json.error).toMatchObject({ reason: "invalid", exitCode: 2, issues: [{ path: ["payload", "name"] }] });
    expect(unknownType.code).toBe(2);
    expect(unknownType.stderr).toMatch(/unknown job type "email\.goodbye".*email\.welcome/);
    expect(notJson).toMatchObject({ code: 2, stderr: expect.stringContaining("not valid JSON") });
    expect(badPriority).toMatchObject({ code: 2, stderr: expect.stringContaining("--priority") });
    expect(badDelay).toMatchObject({ code: 2, stderr: expect.stringContaining("--delay") });
    expect(badQueue).toMatchObject({ code: 2, stderr: expect.stringContaining("--queue:") });
    // No runner in shared/settings/config.ts serves "reports": no job there could ever run.
    expect(unservedQueue).toMatchObject({ code: 2, stderr: expect.stringContaining('--queue: no runner serves queue "reports"') });
    expect(await countJobs()).toBe(before);
  });

  it("loads job types from --jobs, and refuses a module without a registry", async () => {
    const zod = pathToFileURL(createRequire(import.meta.url).resolve("zod")).href;
    const core = new URL("../shared/jobs/job.ts", import.meta.url).href;
    writeFileSync(join(tmp, "jobs.ts"), `import { z } from ${JSON.stringify(zod)};
import { createRegistry, defineJob } from ${JSON.stringify(core)};
export const registry = createRegistry([defineJob({ name: "ping", schema: z.object({ n: z.number() }), handler: () => {} })]);\n`);
    writeFileSync(join(tmp, "empty.ts"), "export const nothing = 1;\n");
    // In an app directory with no leasehold.config.ts: every default, --jobs relative to it.
    const [ok, bad, none, missing] = await Promise.all([
      cli(["enqueue", "ping", '{"n":1}', "--jobs", "jobs.ts", "--json"], { cwd: tmp }),
      cli(["enqueue", "ping", '{"n":"one"}', "--jobs", "jobs.ts"], { cwd: tmp }),
      cli(["enqueue", "ping", '{"n":1}', "--jobs", "empty.ts"], { cwd: tmp }),
      cli(["enqueue", "ping", '{"n":1}', "--jobs", "nope.ts"], { cwd: tmp }),
    ]);
    expect(ok.json).toMatchObject({ name: "ping", payload: { n: 1 } });
    expect(bad).toMatchObject({ code: 2, stderr: expect.stringContaining("payload.n:") });
    expect(none).toMatchObject({ code: 2, stderr: expect.stringContaining("does not export `registry`") });
    expect(missing).toMatchObject({ code: 2, stderr: expect.stringContaining("no such file") });
  });

  it("lists jobs newest first, by status and queue, a page at a time", async () => {
    const dead = [await killOne("list"), await killOne("list"), await killOne("list")];
    const queued = await enqueue(t, noop, { n: 1 }, { queue: "list" });
    const [all, deadOnly, firstPage, table, badStatus] = await Promise.all([
      cli(["jobs", "--queue", "list", "--json"]),
      cli(["jobs", "--queue", "list", "--status", "dead", "--json"]),
      cli(["jobs", "--queue", "list", "--status", "dead", "--limit", "2", "--json"]),
      cli(["jobs", "--queue", "list", "--limit", "2"]),
      cli(["jobs", "--status", "zombie"]),
    ]);
    expect(all.json.jobs.map((j: { id: string }) => j.id)).toEqual([queued.id, ...dead.toReversed()]);
    expect(deadOnly.json.jobs.map((j: { id: string }) => j.id)).toEqual(dead.toReversed());
    expect(firstPage.json).toMatchObject({ nextCursor: dead[1] });
    const next = await cli(["jobs", "--queue", "list", "--status", "dead", "--limit", "2", "--cursor", dead[1]!, "--json"]);
    expect(next.json).toEqual({ jobs: [expect.objectContaining({ id: dead[0], status: "dead", lastError: "kaput" })], nextCursor: null });
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^\s*ID\s+NAME\s+QUEUE\s+STATUS\s+ATTEMPTS\s+RUN AT\s+LAST ERROR$/);
    expect(lines[1]).toMatch(new RegExp(`^\\s*${queued.id}\\s+noop\\s+list\\s+queued\\s+0/3\\s`));
    expect(lines[2]).toMatch(/dead\s+1\/1\s.*kaput$/);
    expect(lines.at(-1)).toBe(`more: add --cursor ${dead[2]}`);
    expect(badStatus).toMatchObject({ code: 2, stderr: expect.stringContaining("--status must be one of") });
  });

  it("shows a job with its attempt history and every run's whole error; 3 when there is none, 2 for a bad id", async () => {
    const error = `Error: kaput ${"x".repeat(100)}\n    at handler (/app/src/jobs.ts:12:11)\n    at run (/app/src/run.ts:3:5)`;
    const id = await killOne("show", error);
    const [human, json, missing, missingJson, badId, tooBig] = await Promise.all([
      cli(["job", id]),
      cli(["job", id, "--json"]),
      cli(["job", "999999999"]),
      cli(["job", "999999999", "--json"]),
      cli(["job", "abc"]),
      cli(["job", "99999999999999999999"]),
    ]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^status\s+dead$/m);
    expect(human.stdout).toMatch(/^payload\s+\{"n":0\}$/m);
    // The table shows the error's first line, cut; below it, the whole error of each run.
    expect(human.stdout).toMatch(/^\s*1\s+1\s+failed\s+runner-1\s.*Error: kaput x+…$/m);
    expect(human.stdout).toContain(`run 1 failed:\n  Error: kaput ${"x".repeat(100)}\n      at handler (/app/src/jobs.ts:12:11)\n      at run (/app/src/run.ts:3:5)\n`);
    expect(json.json).toMatchObject({ id, status: "dead", attemptHistory: [{ run: 1, outcome: "failed", runnerId: "runner-1", error }] });
    expect(missing).toMatchObject({ code: 3, stderr: "leasehold: job 999999999 does not exist\n" });
    expect(missingJson.json).toEqual({ error: { reason: "not_found", exitCode: 3, message: "job 999999999 does not exist", id: "999999999" } });
    expect(badId).toMatchObject({ code: 2, stderr: expect.stringContaining('invalid job id "abc"') });
    expect(tooBig.code).toBe(2);
  });

  it("shows a succeeded job's result, the steps each attempt reached and the steps on record", async () => {
    const { id } = await enqueue(t, noop, { n: 1 }, { queue: "stepped" });
    const [c] = await claimJobs(t, { queue: "stepped", runnerId: "runner-1", limit: 1, maxLeaseMs: 60_000 });
    await settleJobs(t, {
      steps: [{ ...c!, seq: 0, name: "charge", result: JSON.stringify({ chargeId: "ch_1" }), durationMs: 41.6 }],
      succeeded: [{ ...c!, result: JSON.stringify({ ok: true }), steps: JSON.stringify([{ name: "charge", replayed: false, ms: 41.6 }]) }],
    });
    const human = await cli(["job", id]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^result\s+\{"ok":true\}$/m);
    expect(human.stdout).toMatch(/^\s*1\s+1\s+succeeded\s+runner-1\s.*\scharge 42ms\s*$/m);
    expect(human.stdout).toMatch(/^\s*STEP\s+GEN\s+NAME\s+RAN IN\s+TOOK\s+RESULT$/m);
    expect(human.stdout).toMatch(/^\s*1\s+1\s+charge\s+1\s+42ms\s+\{"chargeId":"ch_1"\}$/m);
  });

  it("retries a dead job; 4 when it is not dead, 3 when it does not exist", async () => {
    const id = await killOne("retry");
    const retried = await cli(["retry", id, "--json"]);
    expect(retried.json).toMatchObject({ id, status: "queued", attempts: 0, generation: 2 });
    // `job` shows the retry as a new generation of the same job, its first attempt kept.
    const shown = await cli(["job", id]);
    expect(shown.stdout).toMatch(/^generation\s+2$/m);
    expect(shown.stdout).toMatch(/^\s*1\s+1\s+failed\s+runner-1\s.*kaput$/m);
    const [again, missing] = await Promise.all([cli(["retry", id]), cli(["retry", "999999999"])]);
    expect(again).toMatchObject({ code: 4, stderr: expect.stringContaining(`job ${id} is queued; only a dead job can be retried`) });
    expect(missing.code).toBe(3);
  });

  it("retries every dead job of a queue, with progress on stderr, and leaves other queues", async () => {
    const bulk = [await killOne("bulk"), await killOne("bulk"), await killOne("bulk")];
    const other = await killOne("bulk-other");
    const [both, queueAlone] = await Promise.all([cli(["retry", "5", "--all-dead"]), cli(["retry", "5", "--queue", "bulk"])]);
    expect(both.code).toBe(2);
    expect(queueAlone.code).toBe(2);
    const run = await cli(["retry", "--all-dead", "--queue", "bulk"]);
    expect(run).toMatchObject({ code: 0, stdout: "retried 3 dead jobs on queue bulk\n" });
    // No dev stack here and no deployed scheduler named: the CLI says it did not wake one.
    expect(run.stderr).toMatch(/^retried 3\/3\nnote: the scheduler was not woken: no dev stack runs in this directory, and neither --stage nor LEASEHOLD_SCHEDULER_FUNCTION names a deployed scheduler;/);
    for (const id of bulk) expect((await getJob(t, id))!.status).toBe("queued");
    expect((await getJob(t, other))!.status).toBe("dead");
    const none = await cli(["retry", "--all-dead", "--queue", "bulk", "--json"]);
    expect(none.json).toEqual({ retried: 0 });
  });

  it("cancels a queued job; 4 when it is no longer queued", async () => {
    const { id } = await enqueue(t, noop, { n: 1 }, { queue: "cancel" });
    const cancelled = await cli(["cancel", id]);
    expect(cancelled).toMatchObject({ code: 0, stdout: `cancelled job ${id} (noop on cancel)\n` });
    const [again, missing] = await Promise.all([cli(["cancel", id, "--json"]), cli(["cancel", "999999999"])]);
    expect(again.code).toBe(4);
    expect(again.json.error).toMatchObject({ reason: "conflict", status: "cancelled" });
    expect(missing.code).toBe(3);
  });

  it("shows per-queue stats, from the app's directory or from anywhere with --config", async () => {
    await killOne("stats");
    await enqueue(t, noop, { n: 1 }, { queue: "stats" });
    await enqueue(t, noop, { n: 2 }, { queue: "stats", delayMs: 60_000 });
    const [human, json] = await Promise.all([cli(["stats", "--config", join(ROOT, "leasehold.config.ts")], { cwd: "/" }), cli(["stats", "--json"])]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^QUEUE\s+READY\s+UNSERVED\s+DELAYED\s+RUNNING\s+DEAD\s+OLDEST READY$/m);
    // No runner in the app's config serves "stats", and jobs/index.ts has no "noop": its ready job is unserved.
    expect(human.stdout).toMatch(/^stats\s+1\s+1\s+1\s+0\s+1\s+\d+s$/m);
    expect(json.json.queues).toContainEqual(expect.objectContaining({ queue: "stats", ready: 1, unserved: 1, delayed: 1, running: 0, dead: 1 }));
  });

  it("counts unserved only the ready jobs no runner can claim, by --jobs and the config", async () => {
    await enqueue(t, sendWelcomeEmail, { to: "ada@example.com", name: "Ada" }, { queue: "cli-served" });
    await enqueue(t, noop, { n: 3 }, { queue: "cli-served" });
    // An app config whose runner serves "cli-served", and whose jobs are this repository's.
    writeFileSync(join(tmp, "served.config.ts"), `export default { jobs: ${JSON.stringify(JOBS)}, runners: { runner: { queues: ["cli-served"] } } };\n`);
    const served = ["--config", join(tmp, "served.config.ts")];
    const queue = async (args: string[]) =>
      (await cli(["stats", "--json", ...args])).json.queues.find((q: { queue: string }) => q.queue === "cli-served");
    // Served, but jobs/index.ts has no "noop".
    expect(await queue(served)).toMatchObject({ ready: 2, unserved: 1 });
    // A module that knows "noop" too: nothing is unserved.
    writeFileSync(join(tmp, "with-noop.ts"), `import { registry as app } from ${JSON.stringify(JOBS)};
import { noop } from ${JSON.stringify(NOOP)};
export const registry = new Map([...app, ["noop", noop]]);
`);
    expect(await queue([...served, "--jobs", join(tmp, "with-noop.ts")])).toMatchObject({ ready: 2, unserved: 0 });
    // The app's own config (leasehold.config.ts) serves no "cli-served": all of it is unserved.
    expect(await queue(["--jobs", join(tmp, "with-noop.ts")])).toMatchObject({ ready: 2, unserved: 2 });
  });

  it("shows per-group stats with --groups: ready, running and the limit", async () => {
    await enqueue(t, noop, { n: 1 }, { queue: "grouped", group: "tenant-1" });
    await enqueue(t, noop, { n: 2 }, { queue: "grouped", group: "tenant-1" });
    await enqueue(t, noop, { n: 3 }, { queue: "grouped" });
    const [human, json] = await Promise.all([cli(["stats", "--groups", "--queue", "grouped"]), cli(["stats", "--groups", "--json"])]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^QUEUE\s+GROUP\s+READY\s+RUNNING\s+LIMIT$/m);
    expect(human.stdout).toMatch(/^grouped\s+tenant-1\s+2\s+0\s+-$/m);
    expect(human.stdout).toMatch(/^grouped\s+-\s+1\s+0\s+-$/m);
    expect(human.stdout).not.toMatch(/^stats\s/m);
    expect(json.json.groups).toContainEqual({ queue: "grouped", group: "tenant-1", ready: 2, running: 0, limit: null });
  });

  it("shows, after the groups, each rate limit key with due jobs: waiting, starts in the window, and when it opens", async () => {
    const partner = defineJob({ name: "cli-rated", schema: z.object({}), handler: () => {}, queue: "cli-rated", rateLimit: { limit: 1, periodMs: 60_000, key: "cli-partner" } });
    await enqueueJobs(t, [job(partner, {}), job(partner, {})]);
    expect(await claimJobs(t, { queue: "cli-rated", runnerId: "r", limit: 2, maxLeaseMs: 60_000, rated: true })).toHaveLength(1);
    const [human, json] = await Promise.all([cli(["stats", "--groups", "--queue", "cli-rated"]), cli(["stats", "--groups", "--queue", "cli-rated", "--json"])]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^RATE KEY\s+WAITING\s+STARTED\s+PER\s+OPENS$/m);
    expect(human.stdout).toMatch(/^cli-partner\s+1\s+1\/1\s+60000 ms\s+\d{4}-\d\d-\d\dT/m);
    expect(json.json.rateLimits).toEqual([
      { key: "cli-partner", waiting: 1, limit: 1, periodMs: 60_000, startedInWindow: 1, opensAt: expect.stringMatching(/^\d{4}-/) },
    ]);
    const plainGroups = await cli(["stats", "--groups", "--queue", "grouped"]);
    expect(plainGroups.stdout).not.toMatch(/RATE KEY/);
  });

  it("prunes finished jobs older than the retention, with progress on stderr", async () => {
    const old = await killOne("prune");
    const fresh = await killOne("prune");
    await t.admin.query(`update "${t.schema}".jobs set finished_at = now() - interval '8 days' where id = $1`, [old]);
    const [badDuration, pruned] = await Promise.all([cli(["prune", "--older-than", "7"]), cli(["prune", "--older-than", "7d", "--json"])]);
    expect(badDuration).toMatchObject({ code: 2, stderr: expect.stringContaining("--older-than") });
    expect(pruned.json).toEqual({ deleted: 1, olderThanMs: 7 * 86_400_000 });
    expect(pruned.stderr).toBe("pruned 1 so far\n");
    expect(await getJob(t, old)).toBeNull();
    expect(await getJob(t, fresh)).not.toBeNull();
  });

  it("fails with 1 and a hint, never printing the password, when the database is unreachable or unmigrated", async () => {
    const unreachable = { DATABASE_URL: "postgres://ops:s3cret-pw@127.0.0.1:1/queue" };
    const [human, json, flag, unmigrated] = await Promise.all([
      cli(["stats"], { env: unreachable }),
      cli(["jobs", "--json"], { env: unreachable }),
      cli(["stats", "--database-url", "postgres://ops:s3cret-pw@127.0.0.1:1/queue", "bogus-positional"]),
      cli(["stats", "--schema", "not_migrated_here"]),
    ]);
    expect(human.code).toBe(1);
    expect(human.stderr).toContain("ECONNREFUSED");
    expect(human.stderr).toContain("postgres://ops:***@127.0.0.1:1/queue");
    expect(json.code).toBe(1);
    expect(json.json.error).toMatchObject({ reason: "failed", code: "ECONNREFUSED" });
    expect(flag.code).toBe(2);
    for (const run of [human, json, flag]) expect(run.stdout + run.stderr).not.toContain("s3cret");
    expect(unmigrated).toMatchObject({ code: 1, stderr: expect.stringContaining("leasehold migrate") });
  });
});
