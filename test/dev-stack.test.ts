import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { chmod, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
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

describe("npm run dev", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it("starts Postgres, the functions and the API, serves the dashboard, and leaves no process behind on Ctrl-C", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "leasehold-dev-"));
    dirs.push(dataDir);
    await chmod(dataDir, 0o755); // as root, Postgres runs as the postgres user
    const [pgPort, apiPort] = [await freePort(), await freePort()];
    const token = "dev-stack-test-token-0123456789";
    const child = spawn(process.execPath, ["--import", "tsx", "dev/main.ts"], {
      env: {
        ...process.env, DATABASE_URL: "", PORT: String(apiPort), LEASEHOLD_API_TOKEN: token,
        LEASEHOLD_DEV_PG_PORT: String(pgPort), LEASEHOLD_DEV_DATA_DIR: join(dataDir, "pg"),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    const deadline = Date.now() + 60_000;
    while (!output.includes("Ctrl-C stops everything")) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`dev stack did not start:\n${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(output).toContain(`http://127.0.0.1:${apiPort}/dashboard#token=${token}`);

    // Jobs flow: the example traffic is enqueued through the API and run by the runner functions.
    const headers = { authorization: `Bearer ${token}` };
    let succeeded = 0;
    while (succeeded === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      const res = await fetch(`http://127.0.0.1:${apiPort}/v1/jobs?status=succeeded&limit=5`, { headers });
      succeeded = ((await res.json()) as { jobs: unknown[] }).jobs.length;
    }
    expect(succeeded).toBeGreaterThan(0);
    expect((await fetch(`http://127.0.0.1:${apiPort}/dashboard`)).status).toBe(200);

    const processes = await descendants(child.pid!);
    const postmaster = Number((await readFile(join(dataDir, "pg", "postmaster.pid"), "utf8")).split("\n")[0]);
    expect(processes).toContain(postmaster);
    expect(processes.length).toBeGreaterThan(3); // postgres and its workers, function processes

    child.kill("SIGINT");
    expect(await exited).toBe(0);
    await new Promise((r) => setTimeout(r, 500));
    const left = await Promise.all(
      processes.filter(alive).map(async (pid) => `${pid}: ${(await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")).replaceAll("\0", " ")}`),
    );
    expect(left).toEqual([]);
  }, 120_000);
});
