import { productionConfig, type ConfigInput, type CronOptions } from "./harness.ts";

/**
 * How time runs in a scenario. `production` is the deployment's own config
 * (shared/settings/config.ts) with its crons (scheduler and rescuer every minute) and
 * the default 30 s job lease. `quick` keeps every part but shortens the clocks
 * so a scenario takes seconds: scheduler cron and timeout 10 s, rescuer every
 * 2 s, 3 s leases.
 */
export interface Profile {
  name: "production" | "quick";
  config: ConfigInput;
  cron: CronOptions;
  /** Lease given to the scenario's jobs (null: the job type's default, 30 s). */
  leaseMs: number | null;
}

export const PRODUCTION: Profile = {
  name: "production",
  config: productionConfig(),
  cron: { schedulerMs: 60_000, rescuerMs: 60_000 },
  leaseMs: null,
};

export const QUICK: Profile = {
  name: "quick",
  // Schedules 10x more precise than AWS's, so the scheduler's sleeps fit a 10 s timeout.
  config: productionConfig({
    scheduler: { timeoutSeconds: 12, memoryMb: 256, pollMs: 1_000, schedule: "rate(1 minute)" },
    wake: { precisionMs: 2_000, startLeadMs: 1_000, armSlackMs: 1_000 },
  }),
  cron: { schedulerMs: 10_000, rescuerMs: 2_000 },
  leaseMs: 3_000,
};

export interface ScenarioEnv {
  databaseUrl: string;
  /** A running WebSocket relay ("host:port"); default: each scenario starts its own. */
  wsRelay?: string;
  log?: (message: string) => void;
  keepSchema?: boolean;
}
