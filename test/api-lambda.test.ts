import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import { generateToken } from "../functions/api/auth.ts";
import { readApiEnvironment } from "../functions/api/env.ts";
import { recurring, registry } from "../jobs/index.ts";
import { useWsRelay } from "../shared/db/drivers/neon.ts";
import { createTestDb, databaseUrl, type TestDb } from "./support/db.ts";

/** The Lambda entry itself: env config, Neon per request, the scheduler woken before it returns. */

const token = generateToken();
const APP_NAME = "leasehold-api-lambda-test";

interface Invoke { path: string; type: string | undefined; body: string; answered: boolean }

/** How the fake AWS endpoint answers Invoke: slowly (100 ms), or never. */
let invokeHangs = false;
const schedules: { path: string; body: Record<string, unknown> }[] = [];

function functionUrlEvent(method: string, path: string, body?: unknown, auth = `Bearer ${token}`) {
  const [rawPath, rawQueryString = ""] = path.split("?");
  return {
    version: "2.0", routeKey: "$default", rawPath, rawQueryString, isBase64Encoded: false,
    headers: { host: "api.lambda-url.us-east-1.on.aws", authorization: auth, "content-type": "application/json" },
    requestContext: {
      accountId: "123456789012", apiId: "api", domainName: "api.lambda-url.us-east-1.on.aws", domainPrefix: "api",
      requestId: `req-${Math.random()}`, routeKey: "$default", stage: "$default", time: "", timeEpoch: Date.now(),
      http: { method, path: rawPath, protocol: "HTTP/1.1", sourceIp: "127.0.0.1", userAgent: "vitest" },
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  };
}

describe("the API Lambda entry (Neon driver)", () => {
  let t: TestDb;
  let server: Server;
  const invokes: Invoke[] = [];
  const stdout: string[] = [];
  let handler: (event: unknown, context: unknown) => Promise<{ statusCode: number; body: string }>;
  const context = { awsRequestId: "lambda-req-1", functionName: "api", getRemainingTimeInMillis: () => 29_000 };
  const write = process.stdout.write.bind(process.stdout);

  beforeAll(async () => {
    t = await createTestDb("pg");
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () => {
        if (req.url?.startsWith("/schedules/")) {
          schedules.push({ path: req.url, body: JSON.parse(body) });
          return void res.writeHead(200, { "content-type": "application/json" }).end('{"ScheduleArn":"arn:x"}');
        }
        const invoke: Invoke = { path: req.url ?? "", type: req.headers["x-amz-invocation-type"] as string, body, answered: false };
        invokes.push(invoke);
        // A slow Invoke API: the handler must still wait for it (unless it hangs).
        // It answers after five round trips to the database (longer than a
        // handler that did not wait takes to answer; no timer to miss).
        if (invokeHangs) return;
        void (async () => {
          for (let i = 0; i < 5; i++) await t.admin.query("select 1");
          invoke.answered = true;
          res.writeHead(202).end();
        })();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = new URL(databaseUrl());
    url.searchParams.set("application_name", APP_NAME);
    Object.assign(process.env, {
      DATABASE_URL: url.toString(), LEASEHOLD_API_TOKEN: token, LEASEHOLD_SCHEMA: t.schema,
      LEASEHOLD_SCHEDULER_FUNCTION: "scheduler",
      AWS_ENDPOINT_URL_LAMBDA: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      AWS_ENDPOINT_URL_SCHEDULER: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      LEASEHOLD_SCHEDULER_ARN: "arn:aws:lambda:us-east-1:123456789012:function:scheduler",
      LEASEHOLD_WAKE_ROLE_ARN: "arn:aws:iam::123456789012:role/wake",
      AWS_REGION: "us-east-1", AWS_ACCESS_KEY_ID: "local", AWS_SECRET_ACCESS_KEY: "local",
    });
    // The test Postgres is a plain one: this process's Neon driver reaches it through the relay.
    useWsRelay(inject("wsRelay"));
    process.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      stdout.push(String(chunk));
      return write(chunk, ...rest);
    }) as typeof process.stdout.write;
    const { createApiHandler } = await import("../functions/api.ts");
    handler = createApiHandler({ registry, recurring }) as unknown as typeof handler;
  });
  afterAll(async () => {
    process.stdout.write = write;
    await new Promise((resolve) => server.close(resolve));
    await t.drop();
  });

  const openConnections = async () =>
    (await t.admin.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where application_name = $1`, [APP_NAME])).rows[0]!.n;

  it("enqueues, wakes the scheduler once before returning, and leaves no connection open", async () => {
    const res = await handler(functionUrlEvent("POST", "/v1/jobs", { name: "email.welcome", payload: { to: "ada@example.com", name: "Ada" } }), context);
    expect(res.statusCode).toBe(201);
    const job = JSON.parse(res.body);
    expect(job).toMatchObject({ name: "email.welcome", status: "queued" });
    expect(invokes).toEqual([
      { path: "/2015-03-31/functions/scheduler/invocations", type: "Event", body: '{"source":"leasehold.wake"}', answered: true },
    ]);
    // The pool closes its connections as the handler returns: asked until Postgres shows none (no timer).
    for (let i = 0; i < 1_000 && (await openConnections()) > 0; i++);
    expect(await openConnections()).toBe(0);

    const shown = await handler(functionUrlEvent("GET", `/v1/jobs/${job.id}`), context);
    expect(JSON.parse(shown.body)).toMatchObject({ id: job.id, attemptHistory: [] });
    const listed = await handler(functionUrlEvent("GET", "/v1/jobs?status=queued&limit=5"), context);
    expect(JSON.parse(listed.body).jobs.map((j: { id: string }) => j.id)).toEqual([job.id]);
    expect(invokes).toHaveLength(1);
  });

  it("answers within its normal latency when Invoke hangs, and arms an at() schedule so the job still starts", async () => {
    invokeHangs = true;
    schedules.splice(0); // a slow Invoke before this one may have armed one too
    try {
      const started = performance.now();
      const res = await handler(functionUrlEvent("POST", "/v1/jobs", { name: "email.welcome", payload: { to: "bo@example.com", name: "Bo" } }), context);
      const tookMs = performance.now() - started;
      expect(res.statusCode).toBe(201);
      expect(tookMs).toBeLessThan(1_000);
      expect(schedules).toHaveLength(1);
      expect(schedules[0]!.body).toMatchObject({
        ActionAfterCompletion: "DELETE",
        FlexibleTimeWindow: { Mode: "OFF" },
        ScheduleExpression: expect.stringMatching(/^at\(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\)$/),
        Target: { Arn: "arn:aws:lambda:us-east-1:123456789012:function:scheduler", RoleArn: "arn:aws:iam::123456789012:role/wake", Input: '{"source":"leasehold.wake"}' },
      });
    } finally {
      invokeHangs = false;
      invokes.splice(0);
    }
  });

  it("refuses a wrong token and a bad payload with 4xx, and answers health", async () => {
    expect((await handler(functionUrlEvent("GET", "/v1/queues", undefined, "Bearer nope-nope-nope-nope"), context)).statusCode).toBe(401);
    const bad = await handler(functionUrlEvent("POST", "/v1/jobs", { name: "email.welcome", payload: { to: "nope" } }), context);
    expect(bad.statusCode).toBe(400);
    expect((await handler(functionUrlEvent("GET", "/health", undefined, ""), context)).statusCode).toBe(200);
  });

  it("logs each request as JSON with the Lambda request id, and never the token, payload or connection string", () => {
    const lines = stdout.filter((l) => l.includes('"message":"request"'));
    expect(lines.length).toBeGreaterThanOrEqual(5);
    expect(JSON.parse(lines[0]!)).toMatchObject({ message: "request", requestId: "lambda-req-1", status: 201, path: "/v1/jobs" });
    const all = stdout.join("");
    for (const secret of [token, "ada@example.com", databaseUrl(), process.env.DATABASE_URL!]) {
      expect(all).not.toContain(secret);
    }
  });
});

describe("the API's configuration", () => {
  it("reads linked SST resources first, then the environment", async () => {
    const resources = { ApiToken: { value: "t".repeat(32) }, DatabaseUrl: { value: "postgres://linked" } };
    const env = readApiEnvironment({ schema: "leasehold" }, { DATABASE_URL: "postgres://env", LEASEHOLD_API_TOKEN: "e".repeat(32) }, resources);
    expect(env).toMatchObject({ databaseUrl: "postgres://linked", apiToken: "t".repeat(32), schema: "leasehold" });
    const local = readApiEnvironment({ schema: "leasehold" }, { DATABASE_URL: "postgres://env", LEASEHOLD_API_TOKEN: "e".repeat(32) }, {});
    expect(local).toMatchObject({ databaseUrl: "postgres://env", apiToken: "e".repeat(32), schedulerFunction: undefined });
  });

  it("names what is missing or weak, and never a value", async () => {
    expect(() => readApiEnvironment({ schema: "leasehold" }, {}, {})).toThrow(/DATABASE_URL .*; LEASEHOLD_API_TOKEN/);
    const weak = () => readApiEnvironment({ schema: "leasehold" }, { DATABASE_URL: "postgres://u:secretpw@h/db", LEASEHOLD_API_TOKEN: "abc" }, {});
    expect(weak).toThrow(/at least 16 characters/);
    expect(weak).not.toThrow(/secretpw|abc/);
  });
});
