import { Pool as NeonPool, neonConfig } from "@neondatabase/serverless";
import { namesStatements, type Pool } from "../db.ts";
import { poolTimeouts, survivingIdleErrors, type ConnectionTimeouts } from "./options.ts";

export interface NeonOptions extends Partial<ConnectionTimeouts> {
  max?: number;
  /** Told of each idle connection that died; the pool replaces it. */
  onIdleError?: (err: Error) => void;
  /**
   * A WebSocket-to-TCP relay to reach a plain Postgres (local dev and tests):
   * "host:port", as `useWsRelay`. Unset in production, where Neon's own proxy is used.
   */
  wsProxy?: string;
  /** WebSocket constructor for runtimes without a global one (Node 20). */
  webSocketConstructor?: unknown;
}

/**
 * Neon's serverless driver over WebSocket: Lambda and edge runtimes. Imports
 * no Node built-ins. A Lambda must connect, use and close it within one
 * invocation. Every query has a timeout, and a dead idle connection is
 * dropped, never fatal.
 */
export function createNeonPool(connectionString: string, options: NeonOptions = {}): Pool {
  if (options.webSocketConstructor) {
    neonConfig.webSocketConstructor = options.webSocketConstructor as typeof neonConfig.webSocketConstructor;
  }
  if (options.wsProxy) useWsRelay(options.wsProxy);
  const pool = new NeonPool({ connectionString, max: options.max ?? 10, ...poolTimeouts(options) });
  return namesStatements(survivingIdleErrors(pool, options.onIdleError)) as unknown as Pool;
}

/**
 * Every Neon connection this module opens from now on goes through a
 * WebSocket-to-TCP relay ("host:port") to a plain Postgres, over plain
 * WebSocket, with no pipelining. Local runs and tests only: the dev stack
 * calls it in its local functions (dev/lambda/prelude.ts) and bundles it
 * into its edge Worker (dev/edge-bundle.ts); no deployed code does, and no
 * setting of the deployed environment asks for it.
 */
export function useWsRelay(relay: string): void {
  neonConfig.wsProxy = (host, port) => `${relay}/v2?address=${host}:${port}`;
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineConnect = false;
  neonConfig.pipelineTLS = false;
}
