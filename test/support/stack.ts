import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { fileURLToPath } from "node:url";
import { inject } from "vitest";
import { defineConfig, type Config } from "../../shared/settings/config.ts";
import { localFunctions } from "../../dev/functions.ts";
import type { z } from "zod";
import { configSchema } from "../../shared/settings/config.ts";
import { startLambdaRuntime, type LambdaRuntime, type LambdaRuntimeOptions } from "../../dev/lambda/runtime.ts";
import { LOCAL_ENV } from "../../dev/local-env.ts";
import { createTestDb, databaseUrl, type TestDb } from "./db.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));

export interface Stack {
  t: TestDb;
  config: Config;
  runtime: LambdaRuntime;
  lambda: LambdaClient;
  /** Every line the functions printed, with the function's name. */
  logs: { fn: string; requestId: string | null; line: string }[];
  /** RequestResponse invoke; returns the parsed result, throws on a function error. */
  invoke<T = unknown>(name: string, payload?: unknown): Promise<T>;
  close(): Promise<void>;
}

/**
 * The functions running for real: the local Lambda runtime hosting the
 * runner(s), scheduler and rescuer as child processes, on a fresh schema (or
 * on `db`, as the next deploy of the same database: `close` leaves it),
 * reaching Postgres through the real Neon driver and the WebSocket relay.
 * `jobs` is the module of the job types the functions are deployed with.
 */
export async function startStack(
  input: z.input<typeof configSchema>,
  options: { jobs?: string; db?: TestDb; runtime?: Partial<LambdaRuntimeOptions>; databaseUrl?: string } = {},
): Promise<Stack> {
  const config = defineConfig(input);
  const url = options.databaseUrl ?? databaseUrl();
  const t = options.db ?? (await createTestDb("pg", 10, url));
  const logs: Stack["logs"] = [];
  const { env: extraEnv, ...runtimeOptions } = options.runtime ?? {};
  const runtime = await startLambdaRuntime({
    functions: localFunctions({ root, config, jobsModule: options.jobs ?? fileURLToPath(new URL("../fixtures/e2e-jobs.ts", import.meta.url)) })
      .filter((f) => f.name !== "api" && f.name !== "migrate"),
    rootDir: root,
    env: {
      DATABASE_URL: url,
      LEASEHOLD_SCHEMA: t.schema,
      [LOCAL_ENV.wsProxy]: inject("wsRelay"),
      POWERTOOLS_LOG_LEVEL: process.env.LOG_LEVEL ?? "WARN",
      ...extraEnv,
    },
    onLog: (fn, requestId, line) => void logs.push({ fn, requestId, line }),
    schedulePrecisionMs: config.wake.precisionMs,
    ...runtimeOptions,
  });
  const lambda = new LambdaClient({
    endpoint: runtime.url,
    region: "us-east-1",
    credentials: { accessKeyId: "local", secretAccessKey: "local" },
    maxAttempts: 1,
  });
  return {
    t, config, runtime, lambda, logs,
    async invoke<T>(name: string, payload: unknown = {}) {
      const out = await lambda.send(new InvokeCommand({ FunctionName: name, Payload: JSON.stringify(payload) }));
      const body = out.Payload ? new TextDecoder().decode(out.Payload) : "null";
      if (out.FunctionError) throw new Error(`${name} failed: ${body}`);
      return JSON.parse(body) as T;
    },
    async close() {
      // DUMP_LOGS=<file>: every function's lines, for a failing run.
      if (process.env.DUMP_LOGS) (await import("node:fs")).appendFileSync(process.env.DUMP_LOGS, logs.map((l) => `${l.fn} ${l.line}\n`).join(""));
      lambda.destroy();
      await runtime.close();
      if (!options.db) await t.drop();
    },
  };
}

/** Waits until `check` returns a truthy value, polling. */
export async function until<T>(check: () => Promise<T>, timeoutMs: number, what: string): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The EMF documents the functions (or the one named `fn`) printed that carry `metric`. */
export function emfDocs(stack: Stack, metric: string, fn?: string): Record<string, unknown>[] {
  return stack.logs
    .filter((l) => (fn === undefined || l.fn === fn) && l.line.includes('"_aws"'))
    .map((l) => JSON.parse(l.line) as Record<string, unknown>)
    .filter((doc) => metric in doc);
}

/** The functions' structured log lines whose message is `message`. */
export function logLines(stack: Stack, message: string): Record<string, unknown>[] {
  return stack.logs
    .filter((l) => l.line.startsWith("{") && l.line.includes(JSON.stringify(message)))
    .map((l) => JSON.parse(l.line) as Record<string, unknown>)
    .filter((doc) => doc.message === message);
}
