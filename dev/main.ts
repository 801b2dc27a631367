import { parseArgs } from "node:util";
import { startDemoTraffic } from "./demo-traffic.ts";
import { runDevStack } from "./run.ts";

/**
 * `npm run dev`: the whole system locally. Honours PORT, DATABASE_URL and
 * LEASEHOLD_API_TOKEN; `--jobs <module>` runs your own job types;
 * `--no-demo` starts without the example traffic.
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
  onLog: values.verbose ? (fn, line) => console.log(`[${fn}] ${line}`) : undefined,
  onReady(stack) {
    const demo = values["no-demo"] || values.jobs ? null : startDemoTraffic(stack.apiUrl, stack.apiToken);
    console.log(`
Leasehold is running.
  dashboard   ${stack.dashboardUrl}
  API         ${stack.apiUrl}   (Authorization: Bearer ${stack.apiToken})
  Lambda      ${stack.lambdaUrl}   (local Invoke API: runner, scheduler, rescuer)
  Postgres    ${stack.databaseUrl.replace(/:[^:@/]+@/, ":***@")}
  CLI wakes   export LEASEHOLD_SCHEDULER_FUNCTION=scheduler AWS_ENDPOINT_URL_LAMBDA=${stack.lambdaUrl} AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local
${demo ? "Example jobs are being enqueued (--no-demo to stop that); the crashing one ends dead after 3 rescues." : ""}
Ctrl-C stops everything.`);
    return demo ?? undefined;
  },
});
