/**
 * The API function's runtime configuration. Deployed, the secrets come from
 * SST's linked resources (`Resource.DatabaseUrl.value`, `Resource.ApiToken.value`);
 * locally and in tests, from environment variables. Values are never logged.
 */
import { z } from "zod";
import { config } from "../../shared/config.ts";
import { MIN_TOKEN_LENGTH } from "./auth.ts";

export interface ApiEnvironment {
  databaseUrl: string;
  apiToken: string;
  /** Postgres schema of the queue tables. */
  schema: string;
  /** Function to invoke after an enqueue; unset: no wake-ups (the cron still runs). */
  schedulerFunction?: string;
  /** WebSocket-to-TCP relay ("host:port") for a plain Postgres; unset on Neon. */
  wsProxy?: string;
}

const envSchema = z.object({
  databaseUrl: z.string().min(1, "DATABASE_URL (or the linked DatabaseUrl secret) is not set"),
  apiToken: z
    .string({ error: "LEASEHOLD_API_TOKEN (or the linked ApiToken secret) is not set" })
    .min(MIN_TOKEN_LENGTH, `the API token must be at least ${MIN_TOKEN_LENGTH} characters`),
  schema: z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/, "LEASEHOLD_SCHEMA must be a plain identifier"),
  schedulerFunction: z.string().min(1).optional(),
  wsProxy: z.string().min(1).optional(),
});

/** `Resource[name].value` when SST links it; `import("sst")` throws on any other access. */
export type LinkedResources = Record<string, { value?: unknown } | undefined>;

async function loadLinked(): Promise<{ resources: LinkedResources }> {
  try {
    const { Resource } = await import("sst");
    // Wrapped: awaiting the Proxy itself would ask it for `then`, and it throws.
    return { resources: Resource as unknown as LinkedResources };
  } catch {
    return { resources: {} };
  }
}

function linked(resources: LinkedResources, name: string): string | undefined {
  try {
    if (!(name in resources)) return undefined;
    const value = resources[name]?.value;
    return typeof value === "string" && value ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Reads and checks the configuration; the error names what is missing, never a value. */
export async function readApiEnvironment(
  env: Record<string, string | undefined> = process.env,
  resources?: LinkedResources,
): Promise<ApiEnvironment> {
  const linkedResources = resources ?? (await loadLinked()).resources;
  const parsed = envSchema.safeParse({
    databaseUrl: linked(linkedResources, "DatabaseUrl") ?? env.DATABASE_URL ?? "",
    apiToken: linked(linkedResources, "ApiToken") ?? env.LEASEHOLD_API_TOKEN,
    schema: env.LEASEHOLD_SCHEMA || config.schema,
    schedulerFunction: env.LEASEHOLD_SCHEDULER_FUNCTION || undefined,
    wsProxy: env.LEASEHOLD_WS_PROXY || undefined,
  });
  if (!parsed.success) {
    throw new Error(`API configuration: ${parsed.error.issues.map((i) => i.message).join("; ")}`);
  }
  return parsed.data;
}
