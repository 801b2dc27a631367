/**
 * One local Lambda execution environment: a child process that imports the
 * handler once and then runs one invocation at a time. The parent enforces
 * the function's timeout (SIGKILL at the deadline) and memory (V8 heap cap,
 * plus an RSS poll that kills above `memoryMb`), like Lambda does.
 */
import { buildSync } from "esbuild";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { ChildMessage, InvokeMessage, LambdaErrorBody } from "./protocol.ts";

// child.ts here, child.js in the built package.
const CHILD_SOURCE = fileURLToPath(new URL(`./child${import.meta.url.slice(import.meta.url.lastIndexOf("."))}`, import.meta.url));
const TSX_LOADER_URL = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

/**
 * How an environment's process starts. A handler that is plain JavaScript
 * (a bundle, as deployed: dev/functions.ts) runs in plain Node, as on Lambda,
 * with the bootstrap itself compiled to JavaScript once; a TypeScript handler
 * gets the tsx loader, which would otherwise re-read a multi-megabyte bundle
 * at every cold start.
 */
let plainChild: string | undefined;
function childCommand(handler: string, rootDir: string): { execArgv: string[]; script: string } {
  const module = handler.slice(0, handler.indexOf(".", handler.lastIndexOf("/") + 1));
  const typescript = [".ts", ".mts"].some((ext) => existsSync(join(rootDir, module + ext)));
  if (CHILD_SOURCE.endsWith(".ts") && typescript) return { execArgv: ["--import", TSX_LOADER_URL], script: CHILD_SOURCE };
  if (CHILD_SOURCE.endsWith(".js")) return { execArgv: [], script: CHILD_SOURCE };
  plainChild ??= (() => {
    const { outputFiles } = buildSync({ entryPoints: [CHILD_SOURCE], bundle: true, platform: "node", format: "esm", write: false, logLevel: "error" });
    const text = outputFiles[0]!.text;
    const file = join(tmpdir(), `leasehold-lambda-child-${createHash("sha256").update(text).digest("hex").slice(0, 16)}.mjs`);
    if (!existsSync(file)) {
      writeFileSync(`${file}.${process.pid}`, text);
      renameSync(`${file}.${process.pid}`, file);
    }
    return file;
  })();
  return { execArgv: [], script: plainChild };
}
/** Lambda gives the handler module this long to load. */
export const INIT_TIMEOUT_MS = 10_000;
/** Share of the function's memory given to the V8 old-space heap. */
const HEAP_SHARE = 0.9;

export type FailureCause = "handler" | "init" | "timeout" | "killed";

export type InvocationOutcome =
  | { kind: "result"; payload: string }
  | { kind: "error"; cause: FailureCause; outOfMemory: boolean; error: LambdaErrorBody };

export interface InvocationReport {
  outcome: InvocationOutcome;
  durationMs: number;
  /** Set when this invocation started the environment (a cold start). */
  initMs?: number;
  maxRssMb: number;
}

export interface EnvironmentOptions {
  memoryMb: number;
  /** The complete environment of the child process. */
  env: Record<string, string>;
  rootDir: string;
  /** How often to read the child's RSS while it is busy; 0 turns the check off. */
  memoryPollMs: number;
  onLog(requestId: string | null, line: string): void;
}

export interface Environment {
  readonly pid: number;
  /** Request id of the invocation running now, if any. */
  readonly requestId: string | null;
  readonly alive: boolean;
  invoke(requestId: string, payload: string, timeoutMs: number): Promise<InvocationReport>;
  /** SIGKILLs the process; resolves once it has exited. */
  kill(): Promise<void>;
}

type InitResult = { ok: true; initMs: number } | { ok: false; initMs: number; error: LambdaErrorBody };

interface Pending {
  requestId: string;
  settle(outcome: InvocationOutcome): void;
}

export function spawnEnvironment(options: EnvironmentOptions): Environment {
  const heapMb = Math.max(32, Math.floor(options.memoryMb * HEAP_SHARE));
  const { execArgv, script } = childCommand(options.env._HANDLER ?? "", options.rootDir);
  const child = spawn(process.execPath, [...execArgv, `--max-old-space-size=${heapMb}`, script], {
    cwd: options.rootDir,
    env: options.env,
    stdio: ["ignore", "pipe", "pipe", "ipc"],
    // A process group of its own, as the parent's children: a Ctrl-C in the
    // terminal reaches the parent alone, which ends each one in its order.
    // One whose parent dies exits on the IPC channel's disconnect.
    detached: true,
  });
  const spawnedAt = performance.now();
  let alive = true;
  let pending: Pending | null = null;
  let invocationCount = 0;
  let outOfMemory = false;
  let memoryLimitHit = false;
  let maxRssMb = 0;
  let resolveInit: (result: InitResult) => void = () => {};
  const init = new Promise<InitResult>((resolve) => (resolveInit = resolve));
  // "close" comes after "exit" once the pipes are drained, so a fatal OOM report has been read.
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));

  // JS-level output arrives over IPC; the pipes only carry what native code writes (V8's fatal OOM report).
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream }).on("line", (line) => {
      if (line.includes("heap out of memory")) outOfMemory = true;
      options.onLog(pending?.requestId ?? null, line);
    });
  }
  child.on("message", (message: ChildMessage) => {
    if (message.type === "log") options.onLog(message.requestId, message.line);
    // Init is timed here, from spawn: process start and module load are both the cold start's cost.
    else if (message.type === "ready") resolveInit({ ok: true, initMs: performance.now() - spawnedAt });
    else if (message.type === "initError") resolveInit({ ok: false, initMs: performance.now() - spawnedAt, error: message.error });
    else if (pending?.requestId === message.requestId) {
      pending.settle(
        message.type === "result"
          ? { kind: "result", payload: message.payload }
          : { kind: "error", cause: "handler", outOfMemory: false, error: message.error },
      );
    }
  });
  child.on("error", (error) => options.onLog(null, `[lambda] environment failed: ${error.message}`));
  child.once("close", (code, signal) => {
    alive = false;
    const reason = signal ? `signal: ${SIGNAL_NAMES[signal] ?? signal}` : `exit status ${code ?? "?"}`;
    const note = memoryLimitHit ? `memory limit of ${options.memoryMb} MB exceeded` : outOfMemory ? "JavaScript heap out of memory" : undefined;
    const error = exitError(pending?.requestId, reason, note);
    resolveInit({ ok: false, initMs: performance.now() - spawnedAt, error });
    pending?.settle({ kind: "error", cause: "killed", outOfMemory: outOfMemory || memoryLimitHit, error });
  });
  const initTimer = setTimeout(() => child.kill("SIGKILL"), INIT_TIMEOUT_MS);
  void init.then(() => clearTimeout(initTimer));

  /** Samples RSS; while an invocation runs (`enforce`), kills the process above `memoryMb`. */
  async function pollMemory(enforce: boolean): Promise<void> {
    const rssMb = await readRssMb(child.pid);
    if (rssMb === undefined) return;
    maxRssMb = Math.max(maxRssMb, rssMb);
    if (enforce && rssMb > options.memoryMb && alive) {
      memoryLimitHit = true;
      child.kill("SIGKILL");
    }
  }

  async function invoke(requestId: string, payload: string, timeoutMs: number): Promise<InvocationReport> {
    if (pending) throw new Error(`environment ${child.pid} is busy with ${pending.requestId}`);
    const cold = invocationCount++ === 0;
    let settle: (outcome: InvocationOutcome) => void = () => {};
    const outcome = new Promise<InvocationOutcome>((resolve) => (settle = resolve));
    pending = { requestId, settle };
    const initResult = await init;
    if (!initResult.ok) {
      // A process that died while loading has already settled this as killed; an import error has not.
      const error = { ...initResult.error, errorMessage: `RequestId: ${requestId} ${initResult.error.errorMessage}` };
      settle({ kind: "error", cause: "init", outOfMemory: false, error });
      const failed = await outcome;
      pending = null;
      void kill();
      return { outcome: failed, durationMs: 0, initMs: initResult.initMs, maxRssMb };
    }
    const started = performance.now();
    const deadlineMs = Date.now() + timeoutMs;
    maxRssMb = 0;
    const timer = setTimeout(() => {
      settle({ kind: "error", cause: "timeout", outOfMemory: false, error: timeoutError(requestId, timeoutMs) });
      child.kill("SIGKILL");
    }, timeoutMs);
    const poller = options.memoryPollMs > 0 ? setInterval(() => void pollMemory(true), options.memoryPollMs) : undefined;
    const message: InvokeMessage = { type: "invoke", requestId, payload, deadlineMs };
    child.send(message);
    const result = await outcome;
    const durationMs = performance.now() - started;
    clearTimeout(timer);
    clearInterval(poller);
    // A short invocation may end before the first poll; one sample still fills in Max Memory Used.
    if (maxRssMb === 0 && alive && options.memoryPollMs > 0) await pollMemory(false);
    pending = null;
    return { outcome: result, durationMs, initMs: cold ? initResult.initMs : undefined, maxRssMb };
  }

  async function kill(): Promise<void> {
    if (alive) child.kill("SIGKILL");
    await exited;
  }

  return {
    get pid() {
      return child.pid ?? -1;
    },
    get requestId() {
      return pending?.requestId ?? null;
    },
    get alive() {
      return alive;
    },
    invoke,
    kill,
  };
}

function timeoutError(requestId: string, timeoutMs: number): LambdaErrorBody {
  const seconds = (timeoutMs / 1000).toFixed(2);
  return {
    errorType: "Sandbox.Timedout",
    errorMessage: `RequestId: ${requestId} Error: Task timed out after ${seconds} seconds`,
    stackTrace: [],
  };
}

const SIGNAL_NAMES: Partial<Record<NodeJS.Signals, string>> = { SIGKILL: "killed", SIGABRT: "aborted", SIGSEGV: "segmentation fault" };

function exitError(requestId: string | undefined, reason: string, note?: string): LambdaErrorBody {
  const prefix = requestId ? `RequestId: ${requestId} ` : "";
  const suffix = note ? ` (${note})` : "";
  return { errorType: "Runtime.ExitError", errorMessage: `${prefix}Error: Runtime exited with error: ${reason}${suffix}`, stackTrace: [] };
}

/** Resident set size from /proc (Linux); undefined elsewhere or once the process is gone. */
async function readRssMb(pid: number | undefined): Promise<number | undefined> {
  if (pid === undefined || process.platform !== "linux") return undefined;
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) / 1024;
  } catch {
    return undefined;
  }
}
