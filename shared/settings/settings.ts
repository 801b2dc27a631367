import { DEFAULT_SCHEMA } from "./config.ts";
import { SCHEMA_NAME } from "../db/db.ts";
import { ENV } from "./environment.ts";
import { ValidationError } from "../errors.ts";

/**
 * The settings several places read (the functions, the API, the edge Worker,
 * the CLI, `npm run migrate`), resolved one way everywhere. For each, the
 * first that is set wins:
 *
 * | setting     | given (flag, option) | linked SST secret | environment variable | config        |
 * | ----------- | -------------------- | ----------------- | -------------------- | ------------- |
 * | schema      | `--schema`           |                   | `LEASEHOLD_SCHEMA`   | `config.schema` (default `leasehold`) |
 * | databaseUrl | `--database-url`     | `DatabaseUrl`     | `DATABASE_URL`       |               |
 * | apiToken    |                      | `ApiToken`        | `LEASEHOLD_API_TOKEN`|               |
 *
 * Deployed, infra sets `LEASEHOLD_SCHEMA` on every function from the same
 * config and links the secrets, so all of them agree. Values are never logged.
 */
export interface Settings {
  schema: string;
  databaseUrl: string | undefined;
  apiToken: string | undefined;
}

export type SecretName = "DatabaseUrl" | "ApiToken";

export interface SettingSources {
  given?: { schema?: string; databaseUrl?: string };
  /** A linked secret's value, when links are active. */
  secret?: (name: SecretName) => string | undefined;
  env?: Record<string, string | undefined>;
  config?: { schema?: string };
}

export function resolveSettings(sources: SettingSources = {}): Settings {
  const env = sources.env ?? {};
  const secret = sources.secret ?? (() => undefined);
  const pick = (...values: (string | undefined)[]) => values.find((v) => v !== undefined && v !== "");
  const schema = pick(sources.given?.schema, env[ENV.schema], sources.config?.schema) ?? DEFAULT_SCHEMA;
  if (!SCHEMA_NAME.test(schema)) {
    const message = `invalid schema name ${JSON.stringify(schema)}: use lowercase letters, digits and _ (at most 63)`;
    throw new ValidationError(message, [{ path: ["schema"], message }]);
  }
  return {
    schema,
    databaseUrl: pick(sources.given?.databaseUrl, secret("DatabaseUrl"), env[ENV.databaseUrl]),
    apiToken: pick(secret("ApiToken"), env[ENV.apiToken]),
  };
}
