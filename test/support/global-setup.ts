import type { TestProject } from "vitest/node";
import { startEmbeddedPostgres } from "../../dev/embedded-postgres.ts";
import { startWsRelay } from "../../dev/ws-relay.ts";

declare module "vitest" {
  export interface ProvidedContext {
    databaseUrl: string;
    wsRelay: string;
  }
}

/**
 * One Postgres for the whole run: `DATABASE_URL` if set, else a throwaway
 * embedded one. Plus the WebSocket relay the Neon driver reaches it through.
 */
export default async function setup(project: TestProject) {
  const embedded = process.env.DATABASE_URL ? null : await startEmbeddedPostgres();
  const relay = await startWsRelay();
  project.provide("databaseUrl", process.env.DATABASE_URL ?? embedded!.url);
  project.provide("wsRelay", relay.address);
  return async () => {
    await relay.close();
    await embedded?.stop();
  };
}
