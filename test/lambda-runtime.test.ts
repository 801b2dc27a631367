import { fileURLToPath } from "node:url";
import {
  InvokeCommand,
  LambdaClient,
  ResourceNotFoundException,
  TooManyRequestsException,
  type InvokeCommandInput,
} from "@aws-sdk/client-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FunctionSpec } from "../shared/settings/function-specs.ts";
import { startLambdaRuntime, type LambdaRuntime, type LambdaRuntimeOptions } from "../dev/lambda/runtime.ts";
import { parseSchedule } from "../dev/lambda/schedule.ts";

const rootDir = fileURLToPath(new URL("..", import.meta.url));

function fixture(name: string, file: string, overrides: Partial<FunctionSpec> = {}): FunctionSpec {
  return { name, handler: `test/fixtures/lambda/${file}.handler`, timeoutSeconds: 2, memoryMb: 128, ...overrides };
}

interface LogLine {
  functionName: string;
  requestId: string | null;
  line: string;
}

async function start(options: Omit<LambdaRuntimeOptions, "rootDir" | "onLog">) {
  const lines: LogLine[] = [];
  const runtime = await startLambdaRuntime({
    rootDir,
    onLog: (functionName, requestId, line) => lines.push({ functionName, requestId, line }),
    ...options,
  });
  const client = new LambdaClient({
    endpoint: runtime.url,
    region: "us-east-1",
    credentials: { accessKeyId: "local", secretAccessKey: "local" },
    maxAttempts: 1,
  });
  return { runtime, client, lines };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Body = any;

async function invoke(client: LambdaClient, name: string, event?: unknown, input: Partial<InvokeCommandInput> = {}) {
  const payload = event === undefined ? undefined : JSON.stringify(event);
  const output = await client.send(new InvokeCommand({ FunctionName: name, Payload: payload, ...input }));
  const text = output.Payload ? Buffer.from(output.Payload).toString("utf8") : "";
  return { ...output, body: (text ? JSON.parse(text) : undefined) as Body };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("parseSchedule", () => {
  it("reads rate() in seconds, minutes, hours and days", () => {
    expect(parseSchedule("rate(1 minute)").intervalMs).toBe(60_000);
    expect(parseSchedule("rate(5 minutes)").intervalMs).toBe(300_000);
    expect(parseSchedule("rate(30 seconds)").intervalMs).toBe(30_000);
    expect(parseSchedule("rate(2 hours)").intervalMs).toBe(7_200_000);
    expect(parseSchedule("rate(1 day)").intervalMs).toBe(86_400_000);
  });

  it("reads the every-minute cron", () => {
    expect(parseSchedule("cron(* * * * ? *)").intervalMs).toBe(60_000);
    expect(parseSchedule("cron(0/1 * ? * * *)").intervalMs).toBe(60_000);
  });

  it("rejects invalid expressions with a message saying what is wrong", () => {
    expect(() => parseSchedule("rate(1 minutes)")).toThrow(/takes the unit "minute"/);
    expect(() => parseSchedule("rate(5 minute)")).toThrow(/rate\(5 minutes\)/);
    expect(() => parseSchedule("rate(0 minutes)")).toThrow(/positive whole number/);
    expect(() => parseSchedule("rate(2 fortnights)")).toThrow(/unknown unit/);
    expect(() => parseSchedule("cron(* * * * *)")).toThrow(/6 fields/);
    expect(() => parseSchedule("cron(0 12 * * ? *)")).toThrow(/every-minute/);
    expect(() => parseSchedule("every 5 minutes")).toThrow(/expected rate/);
  });
});

describe("local Lambda runtime", () => {
  let runtime: LambdaRuntime;
  let client: LambdaClient;
  let lines: LogLine[];

  beforeAll(async () => {
    ({ runtime, client, lines } = await start({
      functions: [
        fixture("echo", "echo"),
        fixture("fails", "throw"),
        fixture("fails-onward", "throw", { onFailure: "echo" }),
        fixture("sleep", "sleep"),
        fixture("victim", "sleep", { timeoutSeconds: 10 }),
        fixture("hog", "allocate"),
        fixture("context", "context", { memoryMb: 256, environment: { FROM_SPEC: "spec" } }),
        fixture("counter", "counter"),
        fixture("limited", "sleep"),
        fixture("missing", "no-such-module"),
        fixture("crash", "crash"),
      ],
      env: { FROM_RUNTIME: "runtime" },
      timeoutOverrideMs: { sleep: 1_000 },
      maxConcurrency: { limited: 1 },
    }));
  });

  afterAll(async () => {
    await runtime?.close();
  });

  it("returns the handler's result to a RequestResponse invocation and passes on its log lines", async () => {
    const out = await invoke(client, "echo", { hello: "world" });
    expect(out.StatusCode).toBe(200);
    expect(out.FunctionError).toBeUndefined();
    expect(out.ExecutedVersion).toBe("$LATEST");
    expect(out.body).toEqual({ echo: { hello: "world" }, requestId: out.$metadata.requestId });
    const emf = lines
      .filter((l) => l.requestId === out.$metadata.requestId && l.line.startsWith("{"))
      .map((l) => JSON.parse(l.line) as Body);
    expect(emf).toEqual([expect.objectContaining({ _aws: expect.anything(), echoed: 1, requestId: out.$metadata.requestId })]);
  });

  it("accepts a function ARN, a DryRun and a request for the log tail", async () => {
    const byArn = await invoke(client, "arn:aws:lambda:us-east-1:123456789012:function:echo", { n: 1 });
    expect(byArn.body.echo).toEqual({ n: 1 });
    const dryRun = await invoke(client, "echo", {}, { InvocationType: "DryRun" });
    expect(dryRun.StatusCode).toBe(204);
    const tailed = await invoke(client, "echo", { n: 2 }, { LogType: "Tail" });
    expect(Buffer.from(tailed.LogResult ?? "", "base64").toString()).toContain('event {"n":2}');
  });

  it("answers an Event invocation with 202 and runs it in the background", async () => {
    const out = await invoke(client, "echo", { async: true }, { InvocationType: "Event" });
    expect(out.StatusCode).toBe(202);
    await runtime.idle();
    expect(lines).toContainEqual({ functionName: "echo", requestId: out.$metadata.requestId, line: 'event {"async":true}' });
  });

  it("sends a failed Event invocation to its on-failure destination with Lambda's record, and a successful or synchronous one nowhere", async () => {
    const failed = await invoke(client, "fails-onward", { job: 7 }, { InvocationType: "Event" });
    await invoke(client, "fails-onward", { job: 8 });
    await runtime.idle();
    await runtime.idle();
    const records = lines
      .filter((l) => l.functionName === "echo" && l.line.startsWith("event {\"version\""))
      .map((l) => JSON.parse(l.line.slice("event ".length)) as Body);
    expect(records).toEqual([
      expect.objectContaining({
        requestContext: expect.objectContaining({ requestId: failed.$metadata.requestId, condition: "RetriesExhausted", functionArn: expect.stringContaining(":function:fails-onward") }),
        requestPayload: { job: 7 },
        responsePayload: expect.objectContaining({ errorType: "PaymentDeclined" }),
      }),
    ]);
  });

  it("reports a handler error as an Unhandled function error and keeps the environment", async () => {
    const first = await invoke(client, "fails");
    expect(first.StatusCode).toBe(200);
    expect(first.FunctionError).toBe("Unhandled");
    expect(first.body).toMatchObject({ errorType: "PaymentDeclined", errorMessage: "card declined" });
    expect(first.body.stackTrace.length).toBeGreaterThan(0);
    await invoke(client, "fails");
    expect(runtime.stats().fails).toMatchObject({ invocations: 2, errors: 2, coldStarts: 1 });
  });

  it("kills an invocation at its timeout and cold-starts the next one", async () => {
    const pending = invoke(client, "sleep", { ms: 5_000 });
    await until(() => runtime.running("sleep") === 1);
    const pid = runtime.inflight().find((i) => i.functionName === "sleep")?.pid ?? -1;
    const out = await pending;
    expect(out.FunctionError).toBe("Unhandled");
    expect(out.body.errorMessage).toMatch(/Task timed out after 1\.00 seconds/);
    await until(() => !isAlive(pid));
    const next = await invoke(client, "sleep", { ms: 0 });
    expect(next.body.pid).not.toBe(pid);
    expect(runtime.stats().sleep).toMatchObject({ invocations: 2, timeouts: 1, errors: 1, coldStarts: 2 });
    expect(runtime.stats().sleep?.billedMs).toBeGreaterThanOrEqual(1_000);
  });

  it("kills a process that exhausts its memory and cold-starts the next invocation", async () => {
    const out = await invoke(client, "hog", { forever: true });
    expect(out.FunctionError).toBe("Unhandled");
    expect(out.body.errorType).toBe("Runtime.ExitError");
    expect(out.body.errorMessage).toMatch(/memory limit of 128 MB exceeded|heap out of memory/);
    const next = await invoke(client, "hog", { forever: false });
    expect(next.FunctionError).toBeUndefined();
    expect(runtime.stats().hog).toMatchObject({ invocations: 2, kills: 1, outOfMemory: 1, coldStarts: 2 });
  });

  it("ends the environment on an uncaught exception, reporting it to the invocation", async () => {
    const out = await invoke(client, "crash", { crash: true });
    expect(out.body).toMatchObject({ errorType: "Runtime.UncaughtException", errorMessage: "thrown from a timer" });
    expect((await invoke(client, "crash", {})).FunctionError).toBeUndefined();
    expect(runtime.stats().crash).toMatchObject({ invocations: 2, errors: 1, coldStarts: 2 });
  });

  it("reports a handler module that cannot be loaded as an init error", async () => {
    const out = await invoke(client, "missing");
    expect(out.FunctionError).toBe("Unhandled");
    expect(out.body.errorType).toBe("Runtime.ImportModuleError");
    expect(runtime.stats().missing).toMatchObject({ invocations: 1, errors: 1, coldStarts: 1 });
  });

  it("makes the SDK throw ResourceNotFoundException for an unknown function", async () => {
    const error = await invoke(client, "nope").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResourceNotFoundException);
    expect((error as Error).message).toMatch(/Function not found: .*function:nope/);
  });

  it("reuses a warm environment: one module load, one process", async () => {
    const first = await invoke(client, "counter");
    const second = await invoke(client, "counter");
    expect(first.body).toMatchObject({ inits: 1, invocations: 1 });
    expect(second.body).toEqual({ inits: 1, invocations: 2, pid: first.body.pid });
    expect(runtime.stats().counter).toMatchObject({ invocations: 2, coldStarts: 1 });
  });

  it("spawns another environment when the warm one is busy", async () => {
    const [a, b] = await Promise.all([invoke(client, "victim", { ms: 300 }), invoke(client, "victim", { ms: 300 })]);
    expect(a.body.pid).not.toBe(b.body.pid);
    expect(runtime.stats().victim?.peakConcurrency).toBe(2);
  });

  it("throttles RequestResponse and queues Event invocations at the concurrency limit", async () => {
    const first = invoke(client, "limited", { ms: 600 });
    await until(() => runtime.running("limited") === 1);
    const throttled = await invoke(client, "limited", { ms: 0 }).catch((e: unknown) => e);
    expect(throttled).toBeInstanceOf(TooManyRequestsException);
    const queued = await Promise.all([1, 2].map(() => invoke(client, "limited", { ms: 10 }, { InvocationType: "Event" })));
    expect(queued.map((q) => q.StatusCode)).toEqual([202, 202]);
    expect(runtime.running("limited")).toBe(1);
    expect((await first).body.sleptMs).toBe(600);
    await runtime.idle();
    expect(runtime.stats().limited).toMatchObject({ invocations: 3, throttles: 1, peakConcurrency: 1, coldStarts: 1 });
  });

  it("ends an invocation whose process is SIGKILLed as a Runtime.ExitError", async () => {
    const before = runtime.stats().victim?.kills ?? 0;
    const pending = invoke(client, "victim", { ms: 5_000 });
    await until(() => lines.some((l) => l.functionName === "victim" && l.line === "sleeping 5000 ms"));
    const [running] = runtime.inflight().filter((i) => i.functionName === "victim");
    expect(running).toBeDefined();
    process.kill(running?.pid ?? -1, "SIGKILL");
    const out = await pending;
    expect(out.FunctionError).toBe("Unhandled");
    expect(out.$metadata.requestId).toBe(running?.requestId);
    expect(out.body).toMatchObject({ errorType: "Runtime.ExitError", errorMessage: expect.stringMatching(/signal: killed/) });
    expect(runtime.stats().victim?.kills).toBe(before + 1);
  });

  it("gives the handler a Lambda context whose remaining time counts down from the timeout", async () => {
    const out = await invoke(client, "context", { waitMs: 100 });
    const body = out.body;
    expect(body).toMatchObject({
      requestId: out.$metadata.requestId,
      functionName: "context",
      functionVersion: "$LATEST",
      memoryLimitInMB: "256",
      invokedFunctionArn: expect.stringMatching(/:function:context$/),
      env: { name: "context", memory: "256", timeout: "2", region: "us-east-1", fromSpec: "spec", fromRuntime: "runtime" },
    });
    expect(body.remainingBeforeMs).toBeLessThanOrEqual(2_000);
    expect(body.remainingBeforeMs).toBeGreaterThan(1_000);
    expect(body.remainingAfterMs).toBeLessThanOrEqual(body.remainingBeforeMs - 90);
  });
});

describe("local Lambda runtime, on its own", () => {
  it("lets the V8 heap cap alone kill a runaway allocation", async () => {
    const { runtime, client } = await start({ functions: [fixture("hog", "allocate")], memoryPollMs: 0 });
    try {
      const out = await invoke(client, "hog", { forever: true });
      expect(out.body).toMatchObject({ errorType: "Runtime.ExitError", errorMessage: expect.stringMatching(/heap out of memory/) });
      expect((await invoke(client, "hog", {})).FunctionError).toBeUndefined();
      expect(runtime.stats().hog).toMatchObject({ kills: 1, outOfMemory: 1, coldStarts: 2 });
    } finally {
      await runtime.close();
    }
  });

  it("invokes scheduled functions with an EventBridge scheduled event", async () => {
    const { runtime, lines } = await start({
      functions: [fixture("tick", "echo", { schedule: "rate(1 minute)" }), fixture("plain", "counter")],
      schedules: true,
      scheduleOverrideMs: 100,
    });
    await until(() => (runtime.stats().tick?.invocations ?? 0) >= 2, 15_000);
    await runtime.close();
    const events = lines.filter((l) => l.line.startsWith("event ")).map((l) => JSON.parse(l.line.slice(6)) as Body);
    expect(events[0]).toMatchObject({ "detail-type": "Scheduled Event", source: "aws.events", region: "us-east-1", detail: {} });
    expect(runtime.stats().plain?.invocations).toBe(0);
  }, 20_000); // a cold start (tsx, a TypeScript fixture) and two ticks, on a shared 2-core host

  it("refuses to start with an invalid schedule", async () => {
    const functions = [fixture("bad", "echo", { schedule: "rate(5 minute)" })];
    await expect(startLambdaRuntime({ functions, rootDir })).rejects.toThrow(/rate\(5 minutes\)/);
  });

  it("close() leaves no process alive, idle or busy", async () => {
    const { runtime, client } = await start({ functions: [fixture("counter", "counter"), fixture("sleep", "sleep", { timeoutSeconds: 10 })] });
    const warm = await invoke(client, "counter");
    const pending = invoke(client, "sleep", { ms: 5_000 }).catch((e: unknown) => e);
    await until(() => runtime.running("sleep") === 1);
    const pids = [warm.body.pid as number, ...runtime.inflight().map((i) => i.pid)];
    expect(pids.every(isAlive)).toBe(true);
    await runtime.close();
    expect(pids.filter(isAlive)).toEqual([]);
    await pending;
  });
});
