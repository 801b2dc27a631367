/**
 * Settings that exist only on this machine: the dev stack's and the tests'.
 * They are not part of the deployed contract (shared/settings/environment.ts), and
 * nothing in functions/ or shared/ reads them (test/environment.test.ts
 * greps for their names there). The dev stack sets them on its local Lambda
 * runtime; the prelude it bundles into its local functions
 * (dev/lambda/prelude.ts) applies them before the handler module loads.
 */
export const LOCAL_ENV = {
  /** A WebSocket-to-TCP relay ("host:port") in front of a plain Postgres: the Neon driver goes through it. */
  wsProxy: "LEASEHOLD_WS_PROXY",
  /** "1": label each handler's output by its job (what `leasehold dev` shows). */
  labelOutput: "LEASEHOLD_LABEL_OUTPUT",
  /**
   * "0": the local runtime's functions load no source maps, as a deployed
   * Lambda runs (no --enable-source-maps): the benchmark scenarios time cold
   * starts, and reading a bundle's map took about 100 ms of each.
   */
  sourceMaps: "LEASEHOLD_SOURCE_MAPS",
} as const;
