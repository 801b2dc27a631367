import { execFile, spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { chmod, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { freePort } from "../dev/embedded-postgres.ts";

/** Every descendant of `pid`, from /proc. */
async function descendants(pid: number): Promise<number[]> {
  const parents = new Map<number, number[]>();
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (ppid) parents.set(ppid, [...(parents.get(ppid) ?? []), Number(entry)]);
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const child of parents.get(p) ?? []) {
      out.push(child);
      walk(child);
    }
  };
  walk(pid);
  return out;
}

/** Running, not merely a zombie waiting to be reaped. */
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
};
const cmdline = (pid: number) => readFile(`/proc/${pid}/cmdline`, "utf8").then((c) => c.replaceAll("\0", " "), () => "");

/** Every live process whose command line names `text` (a data directory, say). */
async function processesNaming(text: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const line = await cmdline(Number(entry));
    if (line.includes(text) && alive(Number(entry))) out.push(`${entry}: ${line}`);
  }
  return out;
}

interface Dev {
  child: ChildProcess;
  /** Everything it printed so far, stdout and stderr interleaved. */
  output(): string;
  exited: Promise<number | null>;
  dataDir: string;
}

const running: Dev[] = [];
const dirs: string[] = [];

/**
 * `npm run dev` (or, with `direct`, its node process alone), in a process
 * group of its own as a terminal would run it, on a fresh data folder.
 */
async function startDev(env: Record<string, string>, options: { args?: string[]; direct?: boolean; dataDir?: string } = {}): Promise<Dev> {
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "leasehold-dev-")));
  if (!options.dataDir) dirs.push(dataDir);
  await chmod(dataDir, 0o755); // as root, Postgres runs as the postgres user
  const [cmd, args] = options.direct
    ? [process.execPath, ["--import", "tsx", "dev/main.ts", ...(options.args ?? [])]]
    : ["npm", ["run", "dev", "--", ...(options.args ?? [])]];
  const child = spawn(cmd, args, {
    env: { ...process.env, DATABASE_URL: "", LEASEHOLD_DEV_DATA_DIR: join(dataDir, "pg"), ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  const dev = { child, output: () => output, exited, dataDir };
  running.push(dev);
  return dev;
}

async function ready(dev: Dev, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!dev.output().includes("Ctrl-C stops everything")) {
    if (Date.now() > deadline || dev.child.exitCode !== null) throw new Error(`dev stack did not start:\n${dev.output()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Ctrl-C as a terminal sends it: SIGINT to the whole foreground process group. Returns what was printed after it. */
async function ctrlC(dev: Dev): Promise<{ code: number | null; after: string }> {
  const before = dev.output().length;
  process.kill(-dev.child.pid!, "SIGINT");
  const code = await dev.exited;
  await new Promise((r) => setTimeout(r, 300)); // the last output, through the pipes
  return { code, after: dev.output().slice(before) };
}

const lines = (text: string) => text.split("\n").filter((l) => l.trim() !== "");

describe("npm run dev", () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const dev of running.splice(0)) {
      if (dev.child.exitCode === null && dev.child.signalCode === null) {
        process.kill(-dev.child.pid!, "SIGINT");
        await Promise.race([dev.exited, new Promise((r) => setTimeout(r, 20_000))]);
      }
    }
    for (const s of servers.splice(0)) s.close();
  });
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it("runs Postgres, the functions and the API; a Ctrl-C prints one line, exits 0 and leaves no process behind", async () => {
    const apiPort = await freePort();
    const token = "dev-stack-test-token-0123456789";
    const dev = await startDev({ PORT: String(apiPort), LEASEHOLD_API_TOKEN: token, LEASEHOLD_DEV_PG_PORT: String(await freePort()) });
    await ready(dev);
    expect(dev.output()).toContain(`http://127.0.0.1:${apiPort}/dashboard#token=${token}`);

    // Jobs flow: the example traffic is enqueued through the API and run by the runner functions.
    const headers = { authorization: `Bearer ${token}` };
    let succeeded = 0;
    const deadline = Date.now() + 60_000;
    while (succeeded === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      const res = await fetch(`http://127.0.0.1:${apiPort}/v1/jobs?status=succeeded&limit=5`, { headers });
      succeeded = ((await res.json()) as { jobs: unknown[] }).jobs.length;
    }
    expect(succeeded).toBeGreaterThan(0);
    expect((await fetch(`http://127.0.0.1:${apiPort}/dashboard`)).status).toBe(200);

    const processes = await descendants(dev.child.pid!);
    const postmaster = Number((await readFile(join(dev.dataDir, "pg", "postmaster.pid"), "utf8")).split("\n")[0]);
    expect(processes).toContain(postmaster);
    expect(processes.length).toBeGreaterThan(3); // postgres and its workers, function processes
    const state = JSON.parse(await readFile(join(dev.dataDir, "stack.json"), "utf8"));
    expect(state).toMatchObject({ apiUrl: `http://127.0.0.1:${apiPort}` });

    const { code, after } = await ctrlC(dev);
    expect(lines(after)).toEqual(["stopping... stopped"]);
    expect(code).toBe(0);
    const left = await Promise.all(processes.filter(alive).map(async (pid) => `${pid}: ${await cmdline(pid)}`));
    expect(left).toEqual([]);
    expect(await processesNaming(dev.dataDir)).toEqual([]);
    await expect(readFile(join(dev.dataDir, "stack.json"))).rejects.toThrow(/ENOENT/);
  }, 150_000);

  it("with the API port taken: one line naming the port and how to choose another, exit 1, nothing started", async () => {
    const port = await freePort();
    const blocker = createServer();
    servers.push(blocker);
    await new Promise<void>((r) => blocker.listen(port, "127.0.0.1", () => r()));
    const dev = await startDev({ PORT: String(port) }, { direct: true });
    expect(await dev.exited).toBe(1);
    expect(lines(dev.output())).toEqual([
      `npm run dev: port ${port} is already in use (another dev stack?): choose another API port, e.g. PORT=${port + 1} npm run dev`,
    ]);
    expect(await processesNaming(dev.dataDir)).toEqual([]);

    // Freed, the same data folder starts: nothing was left holding it.
    blocker.close();
    const again = await startDev({ PORT: String(port) }, { direct: true, dataDir: dev.dataDir, args: ["--no-demo"] });
    await ready(again);
    const { code } = await ctrlC(again);
    expect(code).toBe(0);
    expect(await processesNaming(dev.dataDir)).toEqual([]);
  }, 150_000);

  it("two checkouts run side by side (a taken Postgres port is swapped for a free one); one checkout's data is not shared", async () => {
    const pgPort = await freePort();
    const [apiA, apiB] = [await freePort(), await freePort()];
    const a = await startDev({ PORT: String(apiA), LEASEHOLD_DEV_PG_PORT: String(pgPort) }, { args: ["--no-demo"] });
    await ready(a);
    const b = await startDev({ PORT: String(apiB), LEASEHOLD_DEV_PG_PORT: String(pgPort) }, { args: ["--no-demo"] });
    await ready(b);

    const stateA = JSON.parse(await readFile(join(a.dataDir, "stack.json"), "utf8"));
    const stateB = JSON.parse(await readFile(join(b.dataDir, "stack.json"), "utf8"));
    expect(new URL(stateA.databaseUrl).port).toBe(String(pgPort));
    expect(new URL(stateB.databaseUrl).port).not.toBe(String(pgPort));
    for (const port of [apiA, apiB]) expect((await fetch(`http://127.0.0.1:${port}/dashboard`)).status).toBe(200);
    // Each checkout's CLI finds its own stack's Postgres.
    const cli = await promisify(execFile)(process.execPath, ["cli/bin.mjs", "--help"], {
      env: { ...process.env, DATABASE_URL: "", LEASEHOLD_DEV_PG_PORT: "", LEASEHOLD_DEV_DATA_DIR: join(b.dataDir, "pg") },
    });
    expect(cli.stdout).toContain(stateB.databaseUrl.replace(":leasehold@", ":***@"));

    // A second stack on the first one's data (the same checkout twice) is refused in one line.
    const twice = await startDev({ PORT: String(await freePort()) }, { direct: true, dataDir: a.dataDir });
    expect(await twice.exited).toBe(1);
    expect(lines(twice.output())).toEqual([expect.stringMatching(/^npm run dev: the Postgres data in .* is in use by another running process \(pid \d+\): stop that one first$/)]);
    expect((await fetch(`http://127.0.0.1:${apiA}/dashboard`)).status).toBe(200);

    for (const dev of [a, b]) {
      const { code, after } = await ctrlC(dev);
      expect(lines(after)).toEqual(["stopping... stopped"]);
      expect(code).toBe(0);
      expect(await processesNaming(dev.dataDir)).toEqual([]);
    }
  }, 240_000);

  it("a Ctrl-C while it starts (initdb included): one line, exit 0, nothing left", async () => {
    const dev = await startDev({ PORT: String(await freePort()) }, { args: ["--no-demo"] });
    const pidFile = join(dev.dataDir, "pg", "postmaster.pid");
    for (let i = 0; i < 600 && !(await readFile(pidFile).then(() => true, () => false)); i++) await new Promise((r) => setTimeout(r, 100));
    const startedBefore = dev.output().includes("Ctrl-C stops everything");
    const { code, after } = await ctrlC(dev);
    expect(startedBefore).toBe(false); // the signal came while it was starting
    // Start-up output that comes after the signal: on Node 20 only (below the requirement), the AWS SDK's warning.
    const sdkWarning = /\(node:\d+\) Warning: NodeVersionSupportWarning[\s\S]*?to show where the warning was created\)\n/;
    // Either it came up and was stopped, or a start-up step the signal reached failed and what had started was closed.
    expect(lines(after.replace(sdkWarning, ""))).toEqual([expect.stringMatching(/^(stopping\.\.\. )?stopped$/)]);
    expect(code).toBe(0);
    expect(await processesNaming(dev.dataDir)).toEqual([]);
  }, 150_000);

  it("a stack killed outright leaves its Postgres running; the next start on that data stops it and runs", async () => {
    const dev = await startDev({ PORT: String(await freePort()) }, { direct: true, args: ["--no-demo"] });
    await ready(dev);
    process.kill(-dev.child.pid!, "SIGKILL");
    await dev.exited;
    const orphan = Number((await readFile(join(dev.dataDir, "pg", "postmaster.pid"), "utf8")).split("\n")[0]);
    expect(alive(orphan)).toBe(true);

    const next = await startDev({ PORT: String(await freePort()) }, { direct: true, dataDir: dev.dataDir, args: ["--no-demo"] });
    await ready(next);
    expect(alive(orphan)).toBe(false);
    const { code } = await ctrlC(next);
    expect(code).toBe(0);
    expect(await processesNaming(dev.dataDir)).toEqual([]);
  }, 150_000);
  it("shows each handler's output behind its job, a thrown error's stack at the app's own file and line, and a line per death counting its runs", async () => {
    const apiPort = await freePort();
    const token = "dev-output-test-token-0123456789";
    const dev = await startDev(
      { PORT: String(apiPort), LEASEHOLD_API_TOKEN: token, LEASEHOLD_DEV_PG_PORT: String(await freePort()) },
      { direct: true, args: ["--jobs", "test/fixtures/output-jobs.ts"] },
    );
    await ready(dev);
    const enqueue = async (name: string, payload: unknown) => {
      const res = await fetch(`http://127.0.0.1:${apiPort}/v1/jobs`, {
        method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ name, payload }),
      });
      expect(res.status).toBe(201);
      return ((await res.json()) as { id: string }).id;
    };
    const said = await enqueue("output.say", { words: "hello" });
    const failed = await enqueue("output.fail", {});
    const deadline = Date.now() + 90_000;
    while (!dev.output().includes(`job ${failed} (output.fail) dead`) || !dev.output().includes(`#${said} run 1] on attempt`)) {
      if (Date.now() > deadline) throw new Error(`not shown in time:\n${dev.output()}`);
      await new Promise((r) => setTimeout(r, 300));
    }
    const out = dev.output();
    expect(out).toContain(`[output.say #${said} run 1] saying hello\n`);
    expect(out).toContain(`[output.say #${said} run 1] on attempt 1\n`);
    expect(out).toContain(`[output.fail #${failed} run 1] threw Error: broken on purpose\n`);
    // The stack names the fixture's own file and line, not the generated bundle.
    expect(out).toMatch(new RegExp(`\\[output\\.fail #${failed} run 1\\]\\s+at .*test/fixtures/output-jobs\\.ts:19:\\d+`));
    expect(out).toContain(`job ${failed} (output.fail) dead after 1 failure; last: failed: Error: broken on purpose\n`);
    // Without --verbose, the functions' own log lines stay out.
    expect(out).not.toMatch(/"message":"job succeeded"|^REPORT RequestId/m);
    expect((await ctrlC(dev)).code).toBe(0);
  }, 150_000);
});
