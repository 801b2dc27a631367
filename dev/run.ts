import type { Config } from "../shared/config.ts";
import { startDevStack, type DevStack } from "./stack.ts";

export interface RunDevOptions {
  /** The app's root (its leasehold.config.ts, its jobs module). */
  root?: string;
  config?: Config;
  jobsModule?: string;
  /** Started once the stack is up (this repository's example traffic); returns its stop. */
  demo?: (stack: DevStack) => { stop(): void };
  verbose: boolean;
}

/**
 * `npm run dev` and `leasehold dev`: the whole system locally, until Ctrl-C.
 * Honours PORT, DATABASE_URL and LEASEHOLD_API_TOKEN.
 */
export async function runDev(o: RunDevOptions): Promise<void> {
  const stack = await startDevStack({
    root: o.root,
    config: o.config,
    databaseUrl: process.env.DATABASE_URL || undefined,
    port: process.env.PORT ? Number(process.env.PORT) : 8787,
    apiToken: process.env.LEASEHOLD_API_TOKEN || undefined,
    jobsModule: o.jobsModule,
    onLog: o.verbose ? (fn, line) => console.log(`[${fn}] ${line}`) : undefined,
  });
  const demo = o.demo ? o.demo(stack) : null;

  console.log(`
Leasehold is running.
  dashboard   ${stack.dashboardUrl}
  API         ${stack.apiUrl}   (Authorization: Bearer ${stack.apiToken})
  Lambda      ${stack.lambdaUrl}   (local Invoke API: runner, scheduler, rescuer)
  Postgres    ${stack.databaseUrl.replace(/:[^:@/]+@/, ":***@")}
  job types   ${[...stack.registry.keys()].join(", ")}
  CLI wakes   export LEASEHOLD_SCHEDULER_FUNCTION=scheduler AWS_ENDPOINT_URL_LAMBDA=${stack.lambdaUrl} AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local
${demo ? "Example jobs are being enqueued (--no-demo to stop that); the crashing one ends dead after 3 rescues." : ""}
Ctrl-C stops everything.`);

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    console.log("stopping...");
    demo?.stop();
    await stack.close();
    console.log("stopped");
    process.exit(0);
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}
