import { AsyncLocalStorage } from "node:async_hooks";
import { format } from "node:util";
import type { JobType, Registry } from "../shared/jobs/job.ts";

/**
 * Handlers' own output, labelled by job, for `leasehold dev`: what a handler
 * writes through `console` comes out one line at a time behind the job that
 * wrote it (`[email.welcome #42 run 1] `), and an error it throws is printed
 * there too, stack included, before the runner records it. Many jobs run at
 * once in one runner; each handler call keeps its label in its own async
 * context. The dev stack turns it on in its local functions
 * (`labelOutputByJob()`, from dev/lambda/prelude.ts) and shows those lines
 * by default; nothing deployed turns it on, so a deployed runner leaves the
 * output as it is.
 */

/** A line a handler wrote, as labelled here: its label is the first group. */
export const HANDLER_LINE = /^(\[[A-Za-z0-9_.:-]+ #\d+ run \d+\]) /;

const label = new AsyncLocalStorage<string>();
const METHODS = ["log", "info", "warn", "error", "debug"] as const;
let patched = false;
let labelling = false;

/** Labels the output of every registry `labelHandlerOutput` wraps from now on, in this process. */
export function labelOutputByJob(): void {
  labelling = true;
}

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

/** The registry with each handler's output labelled, or the registry itself unless `labelOutputByJob()` was called. */
export function labelHandlerOutput(registry: Registry, on = labelling): Registry {
  if (!on) return registry;
  labelConsole();
  return new Map([...registry].map(([name, type]) => [name, labelled(type)]));
}
