/**
 * The consumer on Cloudflare Workers, when `config.edge` is set: one Worker
 * (`functions/edge/worker.ts`) serving the runner route and the API, and a
 * Cron Worker (the same module) whose Cron Triggers run the scheduler and
 * the rescuer, starting runners through a service binding to the first. It
 * sits next to the Lambda runners (or instead of them, with `runners: {}`),
 * on the same database and migrations. See docs/deploy.md, "On the edge".
 */
import { EDGE_COMPATIBILITY, EDGE_ENV } from "../shared/settings/environment.ts";
import type { InfraContext } from "./context.ts";

/** Workers cron syntax: five fields (minute hour day-of-month month day-of-week). */
export function checkWorkersCron(text: string): string {
  if (text.trim().split(/\s+/).length !== 5) throw new Error(`not a Workers cron expression (five fields): ${JSON.stringify(text)}`);
  return text;
}

/** The runtime the Worker is written and measured for (`EDGE_COMPATIBILITY`). */
const compatibility = { date: EDGE_COMPATIBILITY.date, flags: [...EDGE_COMPATIBILITY.flags] };

export function createEdge(
  ctx: InfraContext, migration: aws.lambda.Invocation,
): { runner: sst.cloudflare.Worker; cron: sst.cloudflare.Cron } | undefined {
  const edge = ctx.config.edge;
  if (!edge || !ctx.edgeHandler) return undefined;
  const { databaseUrl, apiToken } = ctx;
  /** Shared by the edge scheduler and the runner Worker; set it with `npx sst secret set RunnerSecret <value>`. */
  const runnerSecret = new sst.Secret("RunnerSecret");
  const cpuMs = Math.max(...Object.values(edge.runners).map((r) => r.cpuMs));
  // The Worker's settings as bindings, named as it reads them (EDGE_ENV): the schema, and the app's config.
  const environment = { [EDGE_ENV.schema]: ctx.config.schema, [EDGE_ENV.config]: JSON.stringify(ctx.config) };

  const runner = new sst.cloudflare.Worker(ctx.child(EDGE_ENV.runnerService), {
    handler: ctx.edgeHandler,
    // The API on the edge is served from this Worker's URL too.
    url: true,
    compatibility,
    link: [databaseUrl, apiToken, runnerSecret],
    environment,
    transform: {
      worker: (args: { limits?: unknown }, opts: { dependsOn?: unknown }) => {
        // The CPU time one runner invocation may use (Workers Paid: up to 5 min).
        args.limits = { cpuMs };
        // New code goes live only after this deploy's migrations ran (on AWS).
        opts.dependsOn = [migration];
      },
    },
  });

  const schedules = [...new Set([edge.scheduler.schedule, edge.rescuer.schedule].map(checkWorkersCron))];
  const cron = new sst.cloudflare.Cron(ctx.child("EdgeCron"), {
    worker: {
      handler: ctx.edgeHandler,
      compatibility,
      // Linking the runner Worker makes the service binding the Worker reads (EDGE_ENV.runnerService).
      link: [databaseUrl, runnerSecret, runner],
      environment,
      transform: {
        worker: (_args: unknown, opts: { dependsOn?: unknown }) => {
          opts.dependsOn = [migration];
        },
      },
    },
    schedules,
  });
  return { runner, cron };
}
