import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createPgPool } from "../shared/drivers/pg.ts";
import { enqueueJobs, job } from "../shared/enqueue.ts";
import { migrate } from "../shared/migrate.ts";
import { queueStats } from "../shared/stats.ts";
import { runWorker } from "../shared/worker.ts";
import { chainStep, flakyWebhook, registry, sendWelcomeEmail } from "../jobs/index.ts";
import { startEmbeddedPostgres } from "./embedded-postgres.ts";

/**
 * A first look: starts Postgres (embedded, data in .dev-data/, or
 * DATABASE_URL), migrates, enqueues a few example jobs and drains them with
 * the runner loop, then prints the queue.
 */
const root = fileURLToPath(new URL("..", import.meta.url));
const embedded = process.env.DATABASE_URL ? null : await startEmbeddedPostgres({ dataDir: join(root, ".dev-data", "pg"), port: 54329 });
const url = process.env.DATABASE_URL ?? embedded!.url;
const pool = createPgPool(url, 6);
const store = { db: pool, schema: "leasehold" };
try {
  await migrate(pool);
  const run = randomUUID().slice(0, 8);
  await enqueueJobs(store, [
    ...Array.from({ length: 100 }, (_, i) => job(sendWelcomeEmail, { to: `user${i}@example.com`, name: `User ${i}` })),
    job(flakyWebhook, { url: "https://example.com/hook", failTimes: 2 }),
    job(chainStep, { run, step: 1, of: 10 }),
  ]);
  console.log("enqueued 100 emails, a flaky webhook and a 10-step chain; running them...");
  const summary = await runWorker({
    store, registry, queues: ["default"], runnerId: `demo-${run}`, slots: 20, idleMs: 4_000,
    log: { info: (m, f) => console.log(m, JSON.stringify(f)), warn: console.warn, error: console.error },
  });
  console.log("runner summary:", summary);
  console.table(await queueStats(store));
} finally {
  await pool.end();
  await embedded?.stop();
}
