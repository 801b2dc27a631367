/**
 * The signup route on an edge runtime (Cloudflare Workers, Vercel Edge, Deno
 * Deploy, Bun): Neon's driver over WebSocket, one pool per request, ended
 * after the response. `test/edge-bundle.test.ts` bundles this file for a
 * browser-like platform and fails on any Node built-in import.
 */
import { createNeonPool } from "../shared/db/drivers/neon.ts";
import { createSignupApp } from "./signup-route.ts";

export interface EdgeEnv {
  DATABASE_URL: string;
  /** Schema of Leasehold's tables; default `leasehold`. */
  LEASEHOLD_SCHEMA?: string;
  /** Schema of the app's `users` table; default `public`. */
  APP_SCHEMA?: string;
  /** Local development only: a WebSocket-to-TCP relay ("host:port") in front of a plain Postgres. */
  LEASEHOLD_WS_PROXY?: string;
}

/** What Workers-style runtimes pass to keep work alive after the response. */
export interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void;
}

export default {
  async fetch(request: Request, env: EdgeEnv, ctx: ExecutionContext): Promise<Response> {
    const pool = createNeonPool(env.DATABASE_URL, { max: 1, wsProxy: env.LEASEHOLD_WS_PROXY });
    try {
      const app = createSignupApp({ pool, queueSchema: env.LEASEHOLD_SCHEMA, appSchema: env.APP_SCHEMA });
      return await app.fetch(request);
    } finally {
      ctx.waitUntil(pool.end());
    }
  },
};
