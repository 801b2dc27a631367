/**
 * Secrets, set per stage with `npx sst secret set <Name> <value> --stage <stage>`.
 * Linked functions read them at runtime: `Resource.DatabaseUrl.value`.
 */

/** Postgres connection string (Neon in production). */
export const databaseUrl = new sst.Secret("DatabaseUrl");

/** Bearer token the API requires on every request. */
export const apiToken = new sst.Secret("ApiToken");
