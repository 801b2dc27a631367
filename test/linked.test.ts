import { inject } from "vitest";
import { describe, expect, it } from "vitest";
import { linkedLeasehold } from "../functions/waker.ts";
import type { DevStackState } from "../dev/state.ts";
import { databaseUrl } from "./support/db.ts";

/** What `leasehold dev` writes to .dev-data/stack.json (only the fields linkedLeasehold() reads matter here). */
const devState = (over: Partial<DevStackState> = {}): DevStackState => ({
  pid: process.pid, apiUrl: "http://127.0.0.1:1", lambdaUrl: "http://127.0.0.1:2", databaseUrl: databaseUrl(), schema: "dev_schema",
  wsProxy: inject("wsRelay"), schedulerFunction: "scheduler",
  env: { DATABASE_URL: databaseUrl(), LEASEHOLD_SCHEMA: "dev_schema", LEASEHOLD_SCHEDULER_FUNCTION: "scheduler" },
  ...over,
});
/** SST's `Resource` outside a linked function: any access throws. */
const unlinked = new Proxy({}, { get() { throw new Error("not linked"); }, has() { throw new Error("not linked"); } });

describe("linkedLeasehold(): the link, else the environment, else the dev stack running here", () => {
  it("takes the link first, and never a local relay with it", () => {
    const linked = linkedLeasehold({
      resources: { Leasehold: { databaseUrl: "postgres://u:p@neon.example/app", schema: "app_jobs" } as never },
      env: { DATABASE_URL: "postgres://elsewhere/db" }, devState: devState(),
    });
    expect(linked).toMatchObject({ source: "link", databaseUrl: "postgres://u:p@neon.example/app", schema: "app_jobs", wsProxy: undefined });
  });

  it("else the environment, whole: the dev stack's file is not read, and no relay is taken from a variable", () => {
    const linked = linkedLeasehold({
      resources: unlinked as never, env: { DATABASE_URL: "postgres://u:p@127.0.0.1:5/db", LEASEHOLD_SCHEMA: "mine", LEASEHOLD_WS_PROXY: "127.0.0.1:9" }, devState: devState(),
    });
    expect(linked).toMatchObject({ source: "environment", databaseUrl: "postgres://u:p@127.0.0.1:5/db", schema: "mine", wsProxy: undefined });
  });

  it("else the dev stack's published state: its pool reaches the database through the relay, with the Neon driver", async () => {
    const linked = linkedLeasehold({ resources: unlinked as never, env: {}, devState: devState() });
    expect(linked).toMatchObject({ source: "dev stack", databaseUrl: databaseUrl(), schema: "dev_schema", wsProxy: inject("wsRelay") });
    const pool = linked.pool(1);
    try {
      const { rows } = await pool.query<{ one: number }>("select 1 as one");
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await pool.end();
    }
  });

  it("with none of them, its pool() says what it reads", () => {
    const linked = linkedLeasehold({ resources: unlinked as never, env: {}, devState: null });
    expect(linked).toMatchObject({ source: "none", databaseUrl: undefined, schema: "leasehold" });
    expect(() => linked.pool()).toThrow(/no database URL\. It reads the component's link \(Resource\.Leasehold.*DATABASE_URL, LEASEHOLD_SCHEMA and LEASEHOLD_SCHEDULER_FUNCTION.*\.dev-data\/stack\.json/);
  });
});
