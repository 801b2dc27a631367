/**
 * Bundled ahead of each local function's entry (dev/functions.ts, esbuild's
 * `inject`), so it runs before the handler module: applies the local-only
 * settings (dev/local-env.ts) to the very modules the bundle holds. The
 * Neon driver reaches the local Postgres through the WebSocket relay, and a
 * runner labels its handlers' output by job. Never in a deployed bundle.
 */
import { labelOutputByJob } from "../../functions/job-output.ts";
import { useWsRelay } from "../../shared/db/drivers/neon.ts";
import { LOCAL_ENV } from "../local-env.ts";

const relay = process.env[LOCAL_ENV.wsProxy];
if (relay) useWsRelay(relay);
if (process.env[LOCAL_ENV.labelOutput] === "1") labelOutputByJob();
