import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { proxyInFront, type FaultProxy } from "./support/fault-proxy.ts";

/** The fault proxy itself, in front of the suite's Postgres: each fault does what it says. */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pending = Symbol("pending");
const within = <T>(p: Promise<T>, ms: number) => Promise.race([p, sleep(ms).then(() => pending)]);

describe("the fault proxy", () => {
  let proxy: FaultProxy;
  let url: string;
  const clients: pg.Client[] = [];
  const connect = async () => {
    const c = new pg.Client({ connectionString: url });
    c.on("error", () => {});
    clients.push(c);
    await c.connect();
    return c;
  };
  beforeAll(async () => {
    ({ proxy, url } = await proxyInFront(inject("databaseUrl")));
  });
  afterAll(async () => {
    for (const c of clients) await within(c.end(), 200).catch(() => {});
    await proxy.close();
  });

  it("forwards a session, and a cut ends it with an error on the client", async () => {
    const c = await connect();
    expect((await c.query("select 1 as one")).rows).toEqual([{ one: 1 }]);
    expect(proxy.cutAll()).toBeGreaterThanOrEqual(1);
    await expect(c.query("select 1")).rejects.toThrow();
    expect(proxy.counters.cut).toBeGreaterThanOrEqual(1);
  });

  it("silences the chosen share of new connections after startup: queries never answer, sockets stay open", async () => {
    proxy.stallFraction(0.5);
    const [silent, open] = [await connect(), await connect()];
    proxy.stallFraction(0);
    expect(await within(silent.query("select 1"), 500)).toBe(pending);
    expect((await open.query("select 2 as two")).rows).toEqual([{ two: 2 }]);
    expect(proxy.counters.stalled).toBe(1);
    expect(proxy.counters.live).toBeGreaterThanOrEqual(2);
  });

  it("goes silent after the given bytes, mid-session", async () => {
    proxy.stallFraction(1, { afterBytes: 200 });
    const c = await connect();
    proxy.stallFraction(0);
    expect((await c.query("select 1 as one")).rows).toEqual([{ one: 1 }]);
    expect(await within(c.query("select repeat('x', 500) as x"), 500)).toBe(pending);
  });

  it("holds every byte while stalled and delivers them in order on resume", async () => {
    const c = await connect();
    proxy.stallAll();
    const reply = c.query("select 3 as three");
    expect(await within(reply, 300)).toBe(pending);
    proxy.resume();
    expect((await reply).rows).toEqual([{ three: 3 }]);
  });
});
