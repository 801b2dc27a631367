import { createHash } from "node:crypto";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { functionSpecs, type Config, type FunctionSpec } from "../shared/config.ts";
import { entryHandler, writeEntries } from "../functions/entries.ts";

/** This package's handler factories, as a path (local runs import them directly). */
const FACTORIES = fileURLToPath(new URL(`../functions/lambda${import.meta.url.endsWith(".js") ? ".js" : ".ts"}`, import.meta.url));

/**
 * The functions of an app as the local Lambda runtime runs them: the entries
 * the SST component deploys (functions/entries.ts), written for this config
 * and jobs module under `<root>/.leasehold/local/<hash>/`, with handler
 * strings relative to `root`.
 */
export function localFunctions(o: { root: string; config: Config; jobsModule: string }): FunctionSpec[] {
  const jobsModule = resolve(o.root, o.jobsModule);
  const hash = createHash("sha256").update(JSON.stringify([o.config, jobsModule])).digest("hex").slice(0, 16);
  const dir = join(o.root, ".leasehold", "local", hash);
  const files = writeEntries({ dir, jobsModule, config: o.config, factories: FACTORIES });
  const dirHandler = entryHandler(o.root, files.runner).replace(/\/runner\.handler$/, "");
  return functionSpecs(o.config, dirHandler);
}
