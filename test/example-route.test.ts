import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import edge from "../examples/edge-signup.ts";
import { createSignupApp, createUsersTable } from "../examples/signup-route.ts";
import { createTestDb, databaseUrl, drivers, type TestDb } from "./support/db.ts";

describe.each(drivers)("in-route enqueue: signup and welcome email in one transaction (%s driver)", (driver) => {
  let t: TestDb;
  let app: ReturnType<typeof createSignupApp>;
  let wakes = 0;
  beforeAll(async () => {
    t = await createTestDb(driver);
    await createUsersTable(t.admin, t.schema);
    app = createSignupApp({ pool: t.pool, queueSchema: t.schema, appSchema: t.schema, waker: { wake: () => void wakes++, settled: async () => {} } });
  });
  afterAll(() => t.drop());

  const signup = (body: unknown) =>
    app.request("/signup", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const counts = async () => {
    const { rows } = await t.admin.query<{ users: number; jobs: number }>(
      `select (select count(*)::int from "${t.schema}".users) as users, (select count(*)::int from "${t.schema}".jobs) as jobs`,
    );
    return rows[0]!;
  };
  /** Runs `fn` while `sql` is in force, then `undo`. */
  const withFault = async (sql: string, undo: string, fn: () => Promise<void>) => {
    await t.admin.query(sql);
    try {
      await fn();
    } finally {
      await t.admin.query(undo);
    }
  };

  it("commits the user and the job together, then wakes the scheduler", async () => {
    const res = await signup({ email: "ada@example.com", name: "Ada" });
    expect(res.status).toBe(201);
    const { userId, welcomeJobId } = (await res.json()) as { userId: string; welcomeJobId: string };
    const { rows: users } = await t.admin.query(`select email from "${t.schema}".users where id = $1`, [userId]);
    expect(users).toEqual([{ email: "ada@example.com" }]);
    const { rows: jobs } = await t.admin.query(`select name, status, payload from "${t.schema}".jobs where id = $1`, [welcomeJobId]);
    expect(jobs).toEqual([{ name: "email.welcome", status: "queued", payload: { to: "ada@example.com", name: "Ada" } }]);
    expect(wakes).toBe(1);
  });

  it("writes neither when the email is taken: 409", async () => {
    const before = await counts();
    const res = await signup({ email: "ada@example.com", name: "Ada again" });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ error: { code: "email_taken" } });
    expect(await counts()).toEqual(before);
  });

  it("rolls the user back when the enqueue fails", async () => {
    const before = await counts();
    await withFault(
      `alter table "${t.schema}".jobs add constraint refuse_mail check (name <> 'email.welcome') not valid`,
      `alter table "${t.schema}".jobs drop constraint refuse_mail`,
      async () => expect((await signup({ email: "bob@example.com", name: "Bob" })).status).toBe(500),
    );
    expect(await counts()).toEqual(before);
  });

  it("rolls both back when the commit itself fails, after the enqueue", async () => {
    const before = await counts();
    const s = `"${t.schema}"`;
    await withFault(
      `create function ${s}.refuse() returns trigger language plpgsql as $$ begin raise exception 'commit refused'; end $$;
       create constraint trigger refuse_commit after insert on ${s}.users deferrable initially deferred
         for each row execute function ${s}.refuse()`,
      `drop trigger refuse_commit on ${s}.users; drop function ${s}.refuse()`,
      async () => expect((await signup({ email: "cy@example.com", name: "Cy" })).status).toBe(500),
    );
    expect(await counts()).toEqual(before);
    expect(wakes).toBe(1);
  });

  it("refuses a bad body, naming the field, and writes nothing", async () => {
    const before = await counts();
    const res = await signup({ email: "not-an-email", name: "Dee" });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("email");
    expect(await counts()).toEqual(before);
  });

  if (driver === "neon") it("runs as an edge fetch handler with a Neon pool per request", async () => {
    const pending: Promise<unknown>[] = [];
    const request = new Request("https://example.com/signup", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ email: "edge@example.com", name: "Edge" }),
    });
    const env = { DATABASE_URL: databaseUrl(), LEASEHOLD_WS_PROXY: inject("wsRelay"), LEASEHOLD_SCHEMA: t.schema, APP_SCHEMA: t.schema };
    const res = await edge.fetch(request, env, { waitUntil: (p) => void pending.push(p) });
    expect(res.status).toBe(201);
    await Promise.all(pending);
    const { rows } = await t.admin.query(`select payload from "${t.schema}".jobs where payload->>'to' = 'edge@example.com'`);
    expect(rows).toEqual([{ payload: { to: "edge@example.com", name: "Edge" } }]);
  });
});
