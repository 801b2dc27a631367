/**
 * The queue's HTTP API as a Hono app: enqueue, inspect, retry, cancel, and
 * per-queue stats, behind a bearer token. Runtime-neutral (Lambda, Node, edge):
 * the Lambda entry is `functions/api.ts`; tests call `app.request()`.
 */
import { OpenAPIHono } from "@hono/zod-openapi";
import { bodyLimit } from "hono/body-limit";
import { requestId } from "hono/request-id";
import { secureHeaders } from "hono/secure-headers";
import type { Store } from "../../shared/db/db.ts";
import type { Registry } from "../../shared/jobs/job.ts";
import { groupStats, rateLimitStats } from "../../shared/observe/group-stats.ts";
import type { ServingRules } from "../../shared/settings/serving.ts";
import { queueStats, throughput } from "../../shared/observe/stats.ts";
import type { Waker } from "../../shared/scheduler/wake.ts";
import { bearerAuth } from "./auth.ts";
import { registerDashboard } from "./dashboard.ts";
import { ApiError, errorJson, invalidRequest, toErrorResponse } from "./errors.ts";
import { registerJobRoutes, type ApiEnv } from "./jobs.ts";
import { groupsRoute, healthRoute, openApiRoute, queuesRoute, recurringRoute, throughputRoute } from "./routes.ts";
import { listRecurring, type RecurringJob } from "../../shared/jobs/recurring.ts";

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
export const API_VERSION = "1.0.0";

/** What the API logs through: Powertools' `Logger` fits, so does `console`. */
export interface ApiLogger {
  info(message: string, attributes: Record<string, unknown>): void;
  error(message: string, attributes: Record<string, unknown>): void;
}

/** A store opened for one request and closed after its response (a Neon pool on Lambda). */
export interface OpenedStore {
  store: Store;
  close(): Promise<void>;
}

export type AppOptions = {
  /** The job types enqueue accepts; payloads are validated by their schemas. */
  registry: Registry;
  /** The bearer token every route but `/health` requires. */
  token: string;
  /** Woken after an enqueue or retry commits, so an idle queue starts at once. */
  waker?: Waker;
  logger?: ApiLogger;
  maxBodyBytes?: number;
  /**
   * The deployment's queues and lease limits (`servingRules(config)`): a job
   * no runner could run is refused, and `/v1/queues` counts ready jobs no
   * runner can claim (by these rules and `registry`) as `unserved`.
   * Unchecked, and nothing counted unserved, when absent.
   */
  serving?: ServingRules;
  /** The deployment's recurring jobs (its jobs module's `recurring`), listed by `/v1/recurring`. */
  recurring?: readonly RecurringJob[];
  /** The app's jobs module as its config names it (`config.jobs`), for the dashboard to name. */
  jobsModule?: string;
} & ({ store: Store } | { openStore: () => OpenedStore });

export function createApp(options: AppOptions) {
  const app = new OpenAPIHono<ApiEnv>({
    defaultHook: (result) => {
      if (!result.success) throw invalidRequest(result.error);
    },
  });
  useRequestHandling(app, options);
  registerJobRoutes(app, options.registry, options.waker, { serving: options.serving });
  registerStatsRoutes(app, options);
  app.openapi(healthRoute, (c) => c.json({ ok: true as const }, 200));

  // The dashboard's page, script and stylesheet: no token, no data (not in the OpenAPI document).
  registerDashboard(app);

  app.openAPIRegistry.registerComponent("securitySchemes", "bearer", { type: "http", scheme: "bearer" });
  const document = () =>
    app.getOpenAPIDocument({
      openapi: "3.0.3",
      info: { title: "Leasehold", version: API_VERSION, description: "The Leasehold job queue's HTTP API." },
    });
  app.openapi(openApiRoute, (c) => c.json(document() as { openapi: string; paths: Record<string, unknown> }, 200));

  return app;
}

/**
 * What every request goes through before its route: errors as JSON (logged
 * by name and message only), a request id, security headers, the request
 * log, the bearer token, the body limit, and a store opened for the request
 * and closed after its response.
 */
function useRequestHandling(app: OpenAPIHono<ApiEnv>, options: AppOptions): void {
  const { logger } = options;
  const open = "store" in options ? () => ({ store: options.store, close: async () => {} }) : options.openStore;
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  app.onError((err, c) =>
    toErrorResponse(err, c, (fault) => {
      // Name and message only: never the request body, headers or the error's detail.
      const { name, message, stack } = fault instanceof Error ? fault : new Error(String(fault));
      logger?.error("request failed", { requestId: c.var.requestId, path: c.req.path, error: { name, message, stack } });
    }),
  );
  app.notFound((c) => c.json(errorJson("not_found", `no route ${c.req.method} ${c.req.path}`), 404));

  app.use(requestId({ generator: (c) => c.env?.lambdaContext?.awsRequestId ?? crypto.randomUUID() }));
  app.use(secureHeaders());
  app.use(async (c, next) => {
    const startedAt = Date.now();
    await next();
    logger?.info("request", {
      requestId: c.var.requestId, method: c.req.method, path: c.req.path, status: c.res.status,
      durationMs: Date.now() - startedAt,
    });
  });

  const auth = bearerAuth(options.token);
  app.use("/v1/*", auth);
  app.use("/openapi.json", auth);
  app.use(
    "/v1/*",
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: () => {
        throw new ApiError(413, "payload_too_large", `the request body is larger than ${maxBodyBytes} bytes`);
      },
    }),
  );
  app.use("/v1/*", async (c, next) => {
    const { store, close } = open();
    c.set("store", store);
    try {
      await next();
    } finally {
      await close().catch((err: unknown) => logger?.error("closing the store failed", { error: String(err) }));
    }
  });
}

/** The read-only views: queue counts, groups and rate limits, throughput, recurring jobs. */
function registerStatsRoutes(app: OpenAPIHono<ApiEnv>, options: AppOptions): void {
  const { registry } = options;
  const can = options.serving && { names: [...registry.keys()], maxLeaseMs: options.serving };
  app.openapi(queuesRoute, async (c) => c.json({ queues: await queueStats(c.var.store, can) }, 200));
  app.openapi(groupsRoute, async (c) => {
    const query = c.req.valid("query");
    const [groups, rates] = await Promise.all([groupStats(c.var.store, query), rateLimitStats(c.var.store, query)]);
    return c.json({ groups, rateLimits: rates.map((r) => ({ ...r, opensAt: r.opensAt?.toISOString() ?? null })) }, 200);
  });
  app.openapi(throughputRoute, async (c) => {
    const { minutes } = c.req.valid("query");
    const buckets = await throughput(c.var.store, minutes);
    return c.json({ minutes, buckets: buckets.map((b) => ({ ...b, minute: b.minute.toISOString() })) }, 200);
  });
  app.openapi(recurringRoute, async (c) => {
    const listed = await listRecurring(c.var.store, options.recurring ?? []);
    const iso = (d: Date | null) => d?.toISOString() ?? null;
    return c.json({
      recurring: listed.map((r) => ({ ...r, lastTickAt: iso(r.lastTickAt), nextRunAt: iso(r.nextRunAt) })),
      jobsModule: options.jobsModule ?? null,
    }, 200);
  });
}

export type App = ReturnType<typeof createApp>;
