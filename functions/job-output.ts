import { AsyncLocalStorage } from "node:async_hooks";
import { format } from "node:util";
import type { JobType, Registry } from "../shared/job.ts";
import { ENV, processEnvironment, readEnvironment, type EnvSource } from "../shared/environment.ts";

/**
 * Handlers' own output, labelled by job, for `leasehold dev`: what a handler
 * writes through `console` comes out one line at a time behind the job that
 * wrote it (`[email.welcome #42 run 1] `), and an error it throws is printed
 * there too, stack included, before the runner records it. Many jobs run at
 * once in one runner; each handler call keeps its label in its own async
 * context. The dev stack turns it on (LEASEHOLD_LABEL_OUTPUT=1) and shows
 * those lines by default; a deployed runner leaves the output as it is.
 */
export const LABEL_OUTPUT_ENV = ENV.labelOutput;

/** A line a handler wrote, as labelled here: its label is the first group. */
export const HANDLER_LINE = /^(\[[A-Za-z0-9_.:-]+ #\d+ run \d+\]) /;

const label = new AsyncLocalStorage<string>();
const METHODS = ["log", "info", "warn", "error", "debug"] as const;
let patched = false;

/** The label of one run of a job. */
export function jobLabel(name: string, jobId: string, run: number): string {
  return `[${name} #${jobId} run ${run}]`;
}

/** Prefixes every line `console` writes inside a labelled handler call; once per process. */
function labelConsole(): void {
  if (patched) return;
  patched = true;
  for (const method of METHODS) {
    const original = console[method].bind(console);
    console[method] = (...args: unknown[]) => {
      const prefix = label.getStore();
      if (prefix === undefined) return original(...args);
      original(format(...args).split("\n").map((line) => `${prefix} ${line}`).join("\n"));
    };
  }
}

function labelled(type: JobType): JobType {
  return {
    ...type,
    handler: (payload, ctx) =>
      label.run(jobLabel(type.name, ctx.jobId, ctx.run), async () => {
        try {
          return await type.handler(payload, ctx);
        } catch (err) {
          console.error("threw", err);
          throw err;
        }
      }),
  };
}

/** The registry with each handler's output labelled, or the registry itself when the environment does not ask for it. */
export function labelHandlerOutput(registry: Registry, env: EnvSource = processEnvironment()): Registry {
  if (readEnvironment(env).labelOutput !== "1") return registry;
  labelConsole();
  return new Map([...registry].map(([name, type]) => [name, labelled(type)]));
}
