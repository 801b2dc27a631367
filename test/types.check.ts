/**
 * Compile-time checks, run by `npm run typecheck` (tsc), not by vitest: the
 * payload type flows from a job's zod schema to enqueue and to its handler.
 * Each `@ts-expect-error` fails the type check if the line it marks compiles.
 */
import * as z from "zod";
import { sendWelcomeEmail } from "../jobs/index.ts";
import type { Queryable } from "../shared/db/db.ts";
import { enqueue, job } from "../shared/jobs/enqueue.ts";
import { defineJob } from "../shared/jobs/job.ts";

export function enqueueIsTyped(tx: Queryable) {
  void enqueue({ db: tx, schema: "s" }, sendWelcomeEmail, { to: "ada@example.com", name: "Ada" });
  // @ts-expect-error `to` is a string
  void enqueue({ db: tx, schema: "s" }, sendWelcomeEmail, { to: 1, name: "Ada" });
  // @ts-expect-error `name` is required
  void enqueue({ db: tx, schema: "s" }, sendWelcomeEmail, { to: "ada@example.com" });
  // @ts-expect-error batch specs are typed too
  void job(sendWelcomeEmail, { to: "ada@example.com", name: 42 });
}

export const handlerIsTyped = defineJob({
  name: "typed",
  schema: z.object({ count: z.number() }),
  handler: ({ count }) => {
    const n: number = count;
    // @ts-expect-error the payload has no such field
    void count.missing;
    return n;
  },
});
