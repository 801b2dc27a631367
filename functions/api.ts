/**
 * The API Lambda (a function URL). One app per execution environment; one
 * Neon pool per request, opened and closed inside the invocation, because a
 * WebSocket left open would be frozen with the environment. Before returning,
 * the handler waits for any scheduler wake-up the request started, for
 * `WAKE_WAIT_MS` at most.
 */
import { Logger } from "@aws-lambda-powertools/logger";
import { handle, type LambdaContext, type LambdaEvent } from "hono/aws-lambda";
import WebSocket from "ws";
import { createNeonPool } from "../shared/db/drivers/neon.ts";
import { SERVICE_NAME } from "../shared/observe/metrics-names.ts";
import { servingRules } from "../shared/settings/serving.ts";
import { createApp } from "./api/app.ts";
import { readApiEnvironment, type LinkedResources } from "./api/env.ts";
import { resolveApp, type LeaseholdApp } from "./app.ts";
import { lambdaClient } from "./aws.ts";
import { atFallback, createSchedulerWaker, settleBriefly } from "./waker.ts";

export interface ApiHandlerOptions extends LeaseholdApp {
  /** Default: the process's environment (shared/settings/environment.ts) and SST's linked resources. */
  env?: Record<string, string | undefined>;
  resources?: LinkedResources;
}

/** The API's Lambda handler (Hono app, dashboard, OpenAPI) for the app's job types and config. */
export function createApiHandler(options: ApiHandlerOptions) {
  const { registry, recurring, config } = resolveApp(options);
  const env = readApiEnvironment(config, options.env, options.resources);
  const logger = new Logger({ serviceName: SERVICE_NAME });
  // Node 22 (the Lambda runtime) has a global WebSocket; Node 20 (local) needs `ws`.
  const webSocketConstructor = globalThis.WebSocket ? undefined : WebSocket;
  const waker = createSchedulerWaker(
    env.schedulerFunction,
    (err) => logger.warn("waking the scheduler failed; the at() fallback or the next wake-up will find the job", { error: String(err) }),
    lambdaClient(),
    atFallback(),
  );
  const app = createApp({
    registry,
    token: env.apiToken,
    waker,
    logger,
    serving: servingRules(config),
    recurring,
    jobsModule: config.jobs,
    openStore: () => {
      const pool = createNeonPool(env.databaseUrl, { max: 2, webSocketConstructor });
      return { store: { db: pool, schema: env.schema }, close: () => pool.end() };
    },
  });
  const serve = handle(app);
  return async function handler(event: LambdaEvent, context: LambdaContext) {
    try {
      return await serve(event, context);
    } finally {
      // Bounded: a hung Invoke costs the response WAKE_WAIT_MS at most (see functions/waker.ts).
      if (!(await settleBriefly(waker))) logger.warn("wake-up still pending when the response was sent");
    }
  };
}
