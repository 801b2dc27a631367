import { parseArgs } from "node:util";
import { startDemoTraffic } from "./demo-traffic.ts";
import { devOutput } from "./output.ts";
import { readyBanner, runDevStack } from "./run.ts";

/**
 * `npm run dev`: the whole system locally, for this repository's own app
 * (leasehold.config.ts). Honours PORT, DATABASE_URL and LEASEHOLD_API_TOKEN;
 * `--jobs <module>` runs other job types; `--no-demo` starts without the
 * example traffic. An app runs the same with `npx leasehold dev`.
 */
const { values } = parseArgs({
  options: {
    jobs: { type: "string" },
    "no-demo": { type: "boolean", default: false },
    verbose: { type: "boolean", default: false },
  },
});

await runDevStack({
  name: "npm run dev",
  databaseUrl: process.env.DATABASE_URL || undefined,
  port: process.env.PORT ? Number(process.env.PORT) : undefined,
  apiToken: process.env.LEASEHOLD_API_TOKEN || undefined,
  jobsModule: values.jobs,
  onLog: devOutput(values.verbose),
  onReady(stack) {
    const demo = values["no-demo"] || values.jobs ? null : startDemoTraffic(stack.apiUrl, stack.apiToken);
    console.log(readyBanner(stack, demo ? "Example jobs are being enqueued (--no-demo to stop that); the one that crashes its runner ends dead (a line says after what)." : ""));
    return demo ?? undefined;
  },
});
