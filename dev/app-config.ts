import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { defineConfig, type Config } from "../shared/settings/config.ts";

/** The file an app keeps its Leasehold config in, at its root. */
export const APP_CONFIG_FILE = "leasehold.config.ts";

/**
 * An app's config: the default export of `<root>/leasehold.config.ts` (or of
 * `file`), validated; every default when the app has none.
 */
export async function loadAppConfig(root: string, file?: string): Promise<Config> {
  const path = resolve(root, file ?? APP_CONFIG_FILE);
  if (!existsSync(path)) {
    if (file) throw new Error(`no config file at ${path}`);
    return defineConfig({});
  }
  const exported = ((await import(pathToFileURL(path).href)) as { default?: unknown }).default;
  if (exported === undefined) throw new Error(`${path} has no default export: export default defineConfig({ ... })`);
  return defineConfig(exported as Parameters<typeof defineConfig>[0]);
}
