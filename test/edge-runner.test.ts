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

  it("drains jobs enqueued from the edge API with runners fanned out by the edge scheduler", async () => {
    mf = await startEdge({ schema: db.schema });
    const ids = await enqueueOnEdge(mf, Array.from({ length: 50 }, (_, n) => ({ name: "edge.noop", payload: { n } })));
    expect(ids).toHaveLength(50);
    await fireCron(mf);
    const { rows } = await db.admin.query<{ status: string; n: number }>(
      `select status, count(*)::int as n from "${db.schema}".jobs group by status`,
    );
    expect(rows).toEqual([{ status: "succeeded", n: 50 }]);
  });
});
