import type { Config } from "../shared/settings/config.ts";
import type { RecurringJob } from "../shared/jobs/recurring.ts";

/**
 * What every part of the component is built from. `child` names a resource
 * of this component: the default instance ("Leasehold") keeps the plain names
 * earlier deploys used ("Runner", "Scheduler", ...), so adopting the component
 * replaces nothing; another instance prefixes them with its own name.
 */
export interface InfraContext {
  name: string;
  child(resource: string): string;
  config: Config;
  recurring: readonly RecurringJob[];
  /** Handler strings of the generated entries, relative to the app's root. */
  handlers: Record<"runner" | "scheduler" | "rescuer" | "api" | "migrate", string>;
  /** The generated edge Worker entry, relative to the app's root (when config.edge is set). */
  edgeHandler: string | undefined;
  databaseUrl: sst.Secret;
  apiToken: sst.Secret;
  alarmEmail: string | undefined;
  /** The app's migrations directory and Leasehold's own: SQL files copied into the migrate bundle. */
  migrationsDir: string;
}

/** "runner-cpu" -> "RunnerCpu": SST component (and `Resource`) name. */
export function componentName(name: string): string {
  return name
    .split(/[^A-Za-z0-9]+/)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join("");
}
