import { defineConfig, type Config, type ConfigInput } from "../shared/settings/config.ts";
import type { Registry } from "../shared/jobs/job.ts";
import type { RecurringJob } from "../shared/jobs/recurring.ts";
import type { Settings } from "../shared/settings/settings.ts";
import { functionSettings } from "./env.ts";
import { processEnvironment, type EnvSource } from "../shared/settings/environment.ts";

/**
 * What every handler factory is built from: the app's job types, its
 * recurring jobs and its configuration. An app's entry file passes them in
 * (`createRunnerHandler({ registry, config })`); nothing is loaded from a
 * module named by the environment.
 */
export interface LeaseholdApp {
  registry: Registry;
  recurring?: readonly RecurringJob[];
  /** As given to `defineConfig`; default: every default. */
  config?: ConfigInput | Config;
}

export interface ResolvedApp {
  registry: Registry;
  recurring: readonly RecurringJob[];
  config: Config;
  settings: Settings;
}

/** Validates the config (its error names the field) and resolves the settings, once per cold start. */
export function resolveApp(app: LeaseholdApp, env: EnvSource = processEnvironment()): ResolvedApp {
  if (!(app.registry instanceof Map)) throw new Error("registry: pass the Map createRegistry([...]) returns");
  const config = defineConfig((app.config ?? {}) as ConfigInput);
  return { registry: app.registry, recurring: app.recurring ?? [], config, settings: functionSettings(config, env) };
}
