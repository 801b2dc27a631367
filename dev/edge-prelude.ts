/**
 * Bundled ahead of a local edge Worker (dev/edge-bundle.ts, with a relay):
 * the bundle's own Neon driver reaches the local Postgres through the
 * WebSocket relay whose address the bundle was built with. Workers have no
 * process environment, and the deployed Worker reads no such binding.
 */
import { useWsRelay } from "../shared/db/drivers/neon.ts";

declare const __LEASEHOLD_WS_RELAY__: string;

useWsRelay(__LEASEHOLD_WS_RELAY__);
