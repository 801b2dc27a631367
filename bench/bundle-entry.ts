import { createNeonPool } from "../shared/db/drivers/neon.ts";
import { runWorker } from "../shared/runner/worker.ts";
import { registry } from "../jobs/index.ts";

/**
 * Stand-in for functions/runner.ts while it does not exist: what a runner
 * Lambda bundles (the runner loop, the Neon driver, the app's job registry).
 */
export async function handler(_event: unknown, context: { awsRequestId: string; getRemainingTimeInMillis(): number }) {
  const pool = createNeonPool(process.env.DATABASE_URL!, { max: 2 });
  try {
    return await runWorker({
      linger: "fixed",
      store: { db: pool, schema: "leasehold" },
      registry,
      queues: ["default"],
      runnerId: context.awsRequestId,
      slots: 20,
      remainingMs: () => context.getRemainingTimeInMillis(),
      marginMs: 5_000,
    });
  } finally {
    await pool.end();
  }
}
