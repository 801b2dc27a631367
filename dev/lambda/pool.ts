/**
 * The execution environments of one function: warm ones are reused (most
 * recently used first), a new one is spawned when all are busy, up to the
 * function's concurrency limit. Above the limit a synchronous invocation is
 * throttled and an asynchronous one waits in a queue, as on Lambda. Every
 * finished invocation is added to the function's accounting.
 */
import { spawnEnvironment, type Environment, type InvocationReport } from "./environment.ts";

/** Per-function accounting; durations in ms, memory in MB, cost in GB-seconds. */
export interface FunctionStats {
  invocations: number;
  coldStarts: number;
  /** Sum of invocation durations, each rounded up to 1 ms (init not included). */
  billedMs: number;
  /** billed seconds × memory in GB, the unit Lambda charges in. */
  gbSeconds: number;
  /** Sum of init (module load) durations over all cold starts. */
  initMs: number;
  /** Invocations that ended with a function error (handler error, timeout, death). */
  errors: number;
  timeouts: number;
  /** Invocations whose process died under them (OOM, signal, crash); timeouts not included. */
  kills: number;
  outOfMemory: number;
  /** Synchronous invocations refused at the concurrency limit. */
  throttles: number;
  peakConcurrency: number;
  maxRssMb: number;
}

export interface InflightInvocation {
  functionName: string;
  requestId: string;
  pid: number;
  /** Epoch ms. */
  startedAt: number;
}

export interface PoolOptions {
  functionName: string;
  memoryMb: number;
  timeoutMs: number;
  maxConcurrency: number;
  env: Record<string, string>;
  rootDir: string;
  memoryPollMs: number;
  /** An idle environment is shut down after this long. */
  idleEnvironmentMs: number;
  onLog(requestId: string | null, line: string): void;
}

export interface FunctionPool {
  /** Runs now, or returns undefined when the function is at its concurrency limit. */
  tryInvoke(requestId: string, payload: string): Promise<InvocationReport> | undefined;
  /** Runs now, or once a slot frees up. */
  enqueue(requestId: string, payload: string): Promise<InvocationReport>;
  running(): number;
  inflight(): InflightInvocation[];
  stats(): FunctionStats;
  /** Resolves when nothing runs and nothing waits. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

interface Queued {
  requestId: string;
  payload: string;
  resolve(report: InvocationReport): void;
}

export function emptyStats(): FunctionStats {
  return {
    invocations: 0, coldStarts: 0, billedMs: 0, gbSeconds: 0, initMs: 0, errors: 0,
    timeouts: 0, kills: 0, outOfMemory: 0, throttles: 0, peakConcurrency: 0, maxRssMb: 0,
  };
}

export function createPool(options: PoolOptions): FunctionPool {
  const environments = new Set<Environment>();
  const warm: Environment[] = [];
  const reapTimers = new Map<Environment, NodeJS.Timeout>();
  const running = new Map<string, { env: Environment; startedAt: number }>();
  const queue: Queued[] = [];
  const idleWaiters: Array<() => void> = [];
  const stats = emptyStats();
  let closed = false;

  function takeEnvironment(): Environment {
    for (let env = warm.pop(); env; env = warm.pop()) {
      clearTimeout(reapTimers.get(env));
      reapTimers.delete(env);
      if (env.alive) return env;
    }
    const env = spawnEnvironment(options);
    environments.add(env);
    return env;
  }

  function park(env: Environment): void {
    warm.push(env);
    const timer = setTimeout(() => discard(env), options.idleEnvironmentMs);
    timer.unref();
    reapTimers.set(env, timer);
  }

  function discard(env: Environment): void {
    const index = warm.indexOf(env);
    if (index >= 0) warm.splice(index, 1);
    environments.delete(env);
    void env.kill();
  }

  function account(report: InvocationReport): void {
    const billedMs = Math.ceil(report.durationMs);
    stats.invocations += 1;
    stats.billedMs += billedMs;
    stats.gbSeconds += (billedMs / 1000) * (options.memoryMb / 1024);
    stats.maxRssMb = Math.max(stats.maxRssMb, report.maxRssMb);
    if (report.initMs !== undefined) {
      stats.coldStarts += 1;
      stats.initMs += report.initMs;
    }
    const { outcome } = report;
    if (outcome.kind === "result") return;
    stats.errors += 1;
    if (outcome.cause === "timeout") stats.timeouts += 1;
    if (outcome.cause === "killed") stats.kills += 1;
    if (outcome.outOfMemory) stats.outOfMemory += 1;
  }

  async function run(requestId: string, payload: string): Promise<InvocationReport> {
    const env = takeEnvironment();
    running.set(requestId, { env, startedAt: Date.now() });
    stats.peakConcurrency = Math.max(stats.peakConcurrency, running.size);
    const report = await env.invoke(requestId, payload, options.timeoutMs);
    running.delete(requestId);
    account(report);
    const { outcome } = report;
    const reusable = outcome.kind === "result" || (outcome.cause === "handler" && !outcome.error.errorType.startsWith("Runtime."));
    if (reusable && env.alive && !closed) park(env);
    else discard(env);
    startQueued();
    if (running.size === 0 && queue.length === 0) idleWaiters.splice(0).forEach((wake) => wake());
    return report;
  }

  function startQueued(): void {
    while (!closed && queue.length > 0 && running.size < options.maxConcurrency) {
      const next = queue.shift();
      if (next) void run(next.requestId, next.payload).then(next.resolve);
    }
  }

  return {
    tryInvoke(requestId, payload) {
      if (closed || running.size >= options.maxConcurrency) {
        stats.throttles += 1;
        return undefined;
      }
      return run(requestId, payload);
    },
    enqueue(requestId, payload) {
      return new Promise((resolve) => {
        queue.push({ requestId, payload, resolve });
        startQueued();
      });
    },
    running: () => running.size,
    inflight: () =>
      [...running].map(([requestId, { env, startedAt }]) => ({ functionName: options.functionName, requestId, pid: env.pid, startedAt })),
    stats: () => ({ ...stats }),
    idle: () =>
      running.size === 0 && queue.length === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve)),
    async close() {
      closed = true;
      queue.splice(0);
      reapTimers.forEach((timer) => clearTimeout(timer));
      await Promise.all([...environments].map((env) => env.kill()));
      idleWaiters.splice(0).forEach((wake) => wake());
    },
  };
}
