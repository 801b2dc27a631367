import { parseArgs } from "node:util";
import { startDemoTraffic } from "./demo-traffic.ts";
import { runDev } from "./run.ts";

/**
 * `npm run dev`: the whole system locally, for this repository's own app
 * (leasehold.config.ts). `--jobs <module>` runs other job types;
 * `--no-demo` starts without the example traffic. An app runs the same with
 * `npx leasehold dev`.
 */
const { values } = parseArgs({
  options: {
    jobs: { type: "string" },
    "no-demo": { type: "boolean", default: false },
    verbose: { type: "boolean", default: false },
  },
});

const demo = !values["no-demo"] && !values.jobs;
await runDev({
  jobsModule: values.jobs,
  demo: demo ? (stack) => startDemoTraffic(stack.apiUrl, stack.apiToken) : undefined,
  verbose: values.verbose,
});
