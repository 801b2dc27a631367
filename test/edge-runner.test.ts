import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Miniflare } from "miniflare";
import { createTestDb, type TestDb } from "./support/db.ts";
import { enqueueOnEdge, fireCron, startEdge } from "./support/edge.ts";

describe("the consumer on the edge, in workerd", () => {
  let db: TestDb;
  let mf: Miniflare | undefined;
  beforeEach(async () => {
    db = await createTestDb("pg");
  });
  afterEach(async () => {
    await mf?.dispose();
    mf = undefined;
    await db.drop();
  });

  it("drains 1,000 jobs enqueued through the edge API's Hono route with runners fanned out by the edge scheduler", async () => {
    const logs: Record<string, unknown>[] = [];
    mf = await startEdge({ schema: db.schema, logs });
    for (let batch = 0; batch < 2; batch++) {
      const ids = await enqueueOnEdge(mf, Array.from({ length: 500 }, (_, n) => ({ name: "edge.noop", payload: { n: batch * 500 + n } })));
      expect(ids).toHaveLength(500);
    }
    // One Cron Trigger: its scheduler fans runners out and lives until they end.
    await fireCron(mf);
    const { rows } = await db.admin.query<{ status: string; attempts: number; n: number }>(
      `select status::text, attempts, count(*)::int as n from "${db.schema}".jobs group by 1, 2`,
    );
    expect(rows).toEqual([{ status: "succeeded", attempts: 1, n: 1_000 }]);
    const ended = logs.filter((l) => l.message === "runner done");
    // 10 slots per runner, at most 4 at once: more than one runner drained it, none crashed.
    expect(ended.length).toBeGreaterThan(1);
    expect(ended.reduce((n, l) => n + (l.succeeded as number), 0)).toBe(1_000);
    expect(ended.every((l) => l.stale === 0)).toBe(true);
    // The scheduler left no runner counted as live.
    expect((await db.admin.query(`select 1 from "${db.schema}".runners where expires_at > now()`)).rowCount).toBe(0);
  });
});
