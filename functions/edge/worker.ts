/**
 * The consumer on Cloudflare Workers: one Worker module whose `fetch` serves
 * the runner (`POST /leasehold/run`, shared secret) and, with an API token,
 * the queue's HTTP API, and whose `scheduled` handler runs the scheduler and
 * the rescuer on their Cron Triggers. Everything else is the shared core;
 * this file only routes.
 */
import type { Registry } from "../../shared/jobs/job.ts";
import { servingRules } from "../../shared/settings/serving.ts";
import { createApp } from "../api/app.ts";
import { edgeConfig, edgeLog, edgeSchema, edgeSecret, openEdgePool, type EdgeEnv, type WaitUntil } from "./env.ts";
import { runEdgeRescuer } from "./rescuer.ts";
import { handleRun, RUN_PATH } from "./runner.ts";
import { runEdgeScheduler } from "./scheduler.ts";

export type { EdgeEnv } from "./env.ts";

export interface ScheduledEvent {
  cron: string;
  scheduledTime: number;
}

export function createEdgeWorker(options: { registry: Registry }) {
  const { registry } = options;
  return {
    async fetch(request: Request, env: EdgeEnv, ctx: WaitUntil): Promise<Response> {
      if (new URL(request.url).pathname === RUN_PATH) return handleRun(request, env, ctx, registry);
      const token = edgeSecret(env, "apiToken");
      if (!token) return Response.json({ error: "not found" }, { status: 404 });
      const { config } = edgeConfig(env);
      // The app opens a pool per request and ends it before answering.
      const app = createApp({
        registry,
        token,
        logger: edgeLog,
        serving: servingRules(config),
        jobsModule: config.jobs,
        openStore: () => {
          const pool = openEdgePool(env, 1);
          return { store: { db: pool, schema: edgeSchema(env) }, close: () => pool.end() };
        },
      });
      return app.fetch(request);
    },

    /** One Cron Trigger may be both the scheduler's and the rescuer's. */
    async scheduled(event: ScheduledEvent, env: EdgeEnv, ctx: WaitUntil): Promise<void> {
      const { edge } = edgeConfig(env);
      const work: Promise<unknown>[] = [];
      if (event.cron === edge.rescuer.schedule) work.push(runEdgeRescuer(env, registry));
      if (event.cron === edge.scheduler.schedule) work.push(runEdgeScheduler(env, ctx, registry));
      if (work.length === 0) edgeLog.warn("no edge job on this cron", { cron: event.cron });
      await Promise.all(work);
    },
  };
}

