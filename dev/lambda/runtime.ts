/**
 * A local AWS Lambda for development and tests: the real `LambdaClient`,
 * pointed at `url`, invokes functions that run as child processes with their
 * configured timeout and memory, and die for real when they exceed either.
 *
 *   const lambda = await startLambdaRuntime({ functions: functionSpecs(), rootDir });
 *   new LambdaClient({ endpoint: lambda.url, region: "us-east-1", credentials });
 */
import { randomUUID } from "node:crypto";
import { resolve as resolvePath } from "node:path";
import type { AddressInfo } from "node:net";
import type { FunctionSpec } from "../../shared/settings/function-specs.ts";
import type { Clock } from "../../shared/runner/clock.ts";
import { createPool, type FunctionPool, type FunctionStats, type InflightInvocation } from "./pool.ts";
import { createSchedules, type Schedules } from "./eventbridge.ts";
import { createInvokeServer, functionNameOf, type InvocationType, type InvokeResult } from "./server.ts";
import { parseSchedule, scheduledEvent, startTicker } from "./schedule.ts";
import { functionEnvironment, functionArn, LOCAL_REGION, reportLine } from "./lambda-env.ts";
import type { InvocationReport } from "./environment.ts";

export type LogSink = (functionName: string, requestId: string | null, line: string) => void;
/** One value for every function, or values by function name (others unlimited / unchanged). */
export type PerFunction<T> = T | Record<string, T>;

export interface LambdaRuntimeOptions {
  functions: FunctionSpec[];
  /** Project root: handlers resolve from here and it is each process's cwd. */
  rootDir: string;
  /** Extra variables for every function, applied last. */
  env?: Record<string, string>;
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** Every line a function writes; default: stdout, prefixed with the function name. */
  onLog?: LogSink;
  /** Concurrent invocations allowed per function; default unlimited. */
  maxConcurrency?: PerFunction<number>;
  /** Replaces the functions' `timeoutSeconds` (tests use short ones). */
  timeoutOverrideMs?: PerFunction<number>;
  /** Invoke functions that have a `schedule` on that schedule; default false. */
  schedules?: boolean;
  /** Replaces the schedules' intervals (tests speed crons up); such crons fire exactly on their interval. */
  scheduleOverrideMs?: PerFunction<number>;
  /**
   * EventBridge Scheduler's precision, emulated for every schedule on the
   * local Scheduler API (and the functions' crons): a schedule fires up to
   * this late. Default 60 s, as on AWS; tests shorten it with the config's
   * `wake.precisionMs`.
   */
  schedulePrecisionMs?: number;
  /** Where in the precision window schedules fire; default random, as on AWS. */
  scheduleJitter?: "random" | "late";
  /** Deliver every schedule firing twice (EventBridge delivers at least once). */
  duplicateScheduleDeliveries?: boolean;
  /** The local EventBridge Scheduler's clock; default the system's (see `SchedulesOptions.clock`). */
  scheduleClock?: Clock;
  /** RSS check interval of busy processes; 0 turns it off. Default 50 ms. */
  memoryPollMs?: number;
  /** Idle processes are stopped after this long. Default 5 minutes. */
  idleEnvironmentMs?: number;
}

export interface LambdaRuntime {
  /** Endpoint for `new LambdaClient({ endpoint })`. */
  url: string;
  port: number;
  stats(): Record<string, FunctionStats>;
  /** The local EventBridge Scheduler (`new SchedulerClient({ endpoint: url })` reaches it). */
  schedules: Schedules;
  /** In-flight invocations of one function. */
  running(functionName: string): number;
  /** Every in-flight invocation with the pid of the process running it. */
  inflight(): InflightInvocation[];
  /** Resolves when no invocation runs or waits. */
  idle(): Promise<void>;
  /** Stops the crons and the server and kills every process. */
  close(): Promise<void>;
}

export const DEFAULT_MEMORY_POLL_MS = 50;
export const DEFAULT_IDLE_ENVIRONMENT_MS = 5 * 60_000;

export async function startLambdaRuntime(options: LambdaRuntimeOptions): Promise<LambdaRuntime> {
  const specs = new Map(options.functions.map((spec) => [spec.name, validateSpec(spec)]));
  if (specs.size !== options.functions.length) throw new Error("Function names must be unique");
  const rootDir = resolvePath(options.rootDir);
  const onLog = options.onLog ?? defaultLog;
  const tails = new Map<string, string[]>();
  const pools = new Map<string, FunctionPool>();

  const schedules = createSchedules({
    fire: (arn, input) => void invoke(functionNameOf(arn), "Event", input, false),
    precisionMs: options.schedulePrecisionMs,
    jitter: options.scheduleJitter,
    duplicate: options.duplicateScheduleDeliveries,
    clock: options.scheduleClock,
  });
  const server = createInvokeServer({ invoke, schedules });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${options.host ?? "127.0.0.1"}:${port}`;

  for (const spec of specs.values()) {
    const log = (requestId: string | null, line: string): void => {
      if (requestId) tails.get(requestId)?.push(line);
      onLog(spec.name, requestId, line);
    };
    const timeoutMs = pick(options.timeoutOverrideMs, spec.name) ?? spec.timeoutSeconds * 1000;
    const seenSpec = { ...spec, timeoutSeconds: Math.ceil(timeoutMs / 1000) };
    pools.set(spec.name, createPool({
      functionName: spec.name,
      memoryMb: spec.memoryMb,
      timeoutMs,
      maxConcurrency: pick(options.maxConcurrency, spec.name) ?? Infinity,
      env: functionEnvironment(seenSpec, { rootDir, endpoint: url, extra: options.env ?? {} }),
      rootDir,
      memoryPollMs: options.memoryPollMs ?? DEFAULT_MEMORY_POLL_MS,
      idleEnvironmentMs: options.idleEnvironmentMs ?? DEFAULT_IDLE_ENVIRONMENT_MS,
      onLog: log,
    }));
  }

  function finished(name: string, requestId: string, report: InvocationReport): InvocationReport {
    const { outcome } = report;
    if (outcome.kind === "error") onLog(name, requestId, `ERROR Invoke Error ${JSON.stringify(outcome.error)}`);
    onLog(name, requestId, reportLine(requestId, report, specs.get(name)?.memoryMb ?? 0));
    return report;
  }

  async function invoke(name: string, type: InvocationType, payload: string, tail: boolean): Promise<InvokeResult> {
    const pool = pools.get(name);
    if (!pool) return { status: "notFound", arn: functionArn(name) };
    const requestId = randomUUID();
    if (type === "DryRun") return { status: "accepted", requestId };
    if (type === "Event") {
      void pool.enqueue(requestId, payload).then((report) => {
        finished(name, requestId, report);
        const destination = specs.get(name)?.onFailure;
        if (destination && report.outcome.kind === "error") {
          void invoke(destination, "Event", failureRecord(name, requestId, payload, report), false);
        }
      });
      return { status: "accepted", requestId };
    }
    if (tail) tails.set(requestId, []);
    const running = pool.tryInvoke(requestId, payload);
    if (!running) return { status: "throttled" };
    const report = finished(name, requestId, await running);
    const lines = tails.get(requestId);
    tails.delete(requestId);
    const logTail = lines && Buffer.from(lines.join("\n") + "\n").subarray(-4096).toString("base64");
    return { status: "done", requestId, report, logTail };
  }

  // The functions' crons: sped up (exact intervals) when overridden, else on the
  // local EventBridge Scheduler with its precision, as CronV2 deploys them.
  const crons = options.schedules ? [...specs.values()].filter((spec) => spec.schedule) : [];
  const stopTicker = startTicker(
    crons.flatMap((spec) => {
      const intervalMs = pick(options.scheduleOverrideMs, spec.name);
      return intervalMs === undefined ? [] : [{ name: spec.name, intervalMs }];
    }),
    (name) => void invoke(name, "Event", JSON.stringify(scheduledEvent(name, LOCAL_REGION)), false),
  );
  for (const spec of crons) {
    if (pick(options.scheduleOverrideMs, spec.name) !== undefined) continue;
    schedules.create({
      Name: `${spec.name}-cron`,
      ScheduleExpression: spec.schedule!,
      Target: { Arn: functionArn(spec.name), Input: JSON.stringify(scheduledEvent(spec.name, LOCAL_REGION)) },
    });
  }

  return {
    url,
    port,
    stats: () => Object.fromEntries([...pools].map(([name, pool]) => [name, pool.stats()])),
    running: (name) => pools.get(name)?.running() ?? 0,
    inflight: () => [...pools.values()].flatMap((pool) => pool.inflight()),
    idle: async () => void (await Promise.all([...pools.values()].map((pool) => pool.idle()))),
    schedules,
    async close() {
      stopTicker();
      schedules.close();
      await Promise.all([...pools.values()].map((pool) => pool.close()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * What Lambda sends an on-failure destination after an asynchronous
 * invocation failed with no retry left (the runners have none).
 */
function failureRecord(name: string, requestId: string, payload: string, report: InvocationReport): string {
  const { outcome } = report;
  let requestPayload: unknown = payload;
  try {
    requestPayload = JSON.parse(payload);
  } catch {
    // kept as text
  }
  return JSON.stringify({
    version: "1.0",
    timestamp: new Date().toISOString(),
    requestContext: { requestId, functionArn: `${functionArn(name)}:$LATEST`, condition: "RetriesExhausted", approximateInvokeCount: 1 },
    requestPayload,
    responseContext: { statusCode: 200, executedVersion: "$LATEST", functionError: "Unhandled" },
    responsePayload: outcome.kind === "error" ? outcome.error : null,
  });
}

function validateSpec(spec: FunctionSpec): FunctionSpec {
  const problem =
    !/^[A-Za-z0-9_-]{1,64}$/.test(spec.name) ? "name must be 1-64 letters, digits, - or _"
    : !/^(?:[^/]+\/)*[^./]+\.[A-Za-z_$][\w$.]*$/.test(spec.handler) ? `handler "${spec.handler}" must look like path/to/module.export`
    : !(spec.timeoutSeconds > 0 && spec.timeoutSeconds <= 900) ? "timeoutSeconds must be in (0, 900]"
    : !(spec.memoryMb >= 128 && spec.memoryMb <= 10_240) ? "memoryMb must be in [128, 10240]"
    : undefined;
  if (problem) throw new Error(`Invalid function "${spec.name}": ${problem}`);
  if (spec.schedule) parseSchedule(spec.schedule);
  return spec;
}

function pick<T>(value: PerFunction<T> | undefined, name: string): T | undefined {
  return typeof value === "object" ? (value as Record<string, T>)[name] : value;
}

function defaultLog(functionName: string, _requestId: string | null, line: string): void {
  process.stdout.write(`[${functionName}] ${line}\n`);
}
