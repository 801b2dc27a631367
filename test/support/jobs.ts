import * as z from "zod";
import { defineJob } from "../../shared/jobs/job.ts";

/** Job types the core tests enqueue; handlers are set per test where run. */
export const noop = defineJob({ name: "noop", schema: z.object({ n: z.number().int() }), handler: () => {} });

export const email = defineJob({
  name: "email.welcome",
  schema: z.object({ to: z.email(), userId: z.number().int().positive() }),
  handler: () => {},
  queue: "mail",
  maxAttempts: 5,
  leaseMs: 10_000,
});
