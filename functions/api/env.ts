/**
 * The API function's runtime configuration. Deployed, the secrets come from
 * SST's linked resources (`Resource.DatabaseUrl.value`, `Resource.ApiToken.value`);
 * locally and in tests, from environment variables. Values are never logged.
 */
import * as z from "zod";
import type { Config } from "../../shared/settings/config.ts";
import { SCHEMA_NAME } from "../../shared/db/db.ts";
import { resolveSettings } from "../../shared/settings/settings.ts";
import { MIN_TOKEN_LENGTH } from "./auth.ts";
import { linkedSecret, type LinkedResources } from "../env.ts";
import { processEnvironment, readEnvironment, type EnvSource } from "../../shared/settings/environment.ts";

export type { LinkedResources };

export interface ApiEnvironment {
  databaseUrl: string;
  apiToken: string;
  /** Postgres schema of the queue tables. */
  schema: string;
  /** Function to invoke after an enqueue; unset: no wake-ups (the cron still runs). */
  schedulerFunction?: string;
}

const envSchema = z.object({
  databaseUrl: z.string().min(1, "DATABASE_URL (or the linked DatabaseUrl secret) is not set"),
  apiToken: z
    .string({ error: "LEASEHOLD_API_TOKEN (or the linked ApiToken secret) is not set" })
    .min(MIN_TOKEN_LENGTH, `the API token must be at least ${MIN_TOKEN_LENGTH} characters`),
  schema: z.string().regex(SCHEMA_NAME, "LEASEHOLD_SCHEMA must be a plain identifier"),
  schedulerFunction: z.string().min(1).optional(),
});

/** Reads and checks the configuration; the error names what is missing, never a value. */
export function readApiEnvironment(
  config: Pick<Config, "schema">,
  env: EnvSource = processEnvironment(),
  resources?: LinkedResources,
): ApiEnvironment {
  const settings = resolveSettings({ secret: (name) => linkedSecret(name, resources), env, config });
  const parsed = envSchema.safeParse({
    databaseUrl: settings.databaseUrl ?? "",
    apiToken: settings.apiToken,
    schema: settings.schema,
    schedulerFunction: readEnvironment(env).schedulerFunction,
  });
  if (!parsed.success) {
    throw new Error(`API configuration: ${parsed.error.issues.map((i) => i.message).join("; ")}`);
  }
  return parsed.data;
}
