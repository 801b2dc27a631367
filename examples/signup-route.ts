/**
 * Enqueue from your own route, inside your own transaction: `POST /signup`
 * inserts the user and enqueues their welcome email in ONE transaction.
 * Commit, and both exist; roll back (duplicate email, a failed enqueue, a
 * crash before commit) and neither does: no email for a user who isn't there,
 * no user who never gets one.
 *
 * Driver-neutral: pass a `pg` pool on Node, a Neon pool on Lambda or an edge
 * runtime (see `edge-signup.ts`). Imports no Node built-ins.
 */
import { Hono } from "hono";
import { validator } from "hono/validator";
import * as z from "zod";
import { sendWelcomeEmail } from "../jobs/index.ts";
import { schemaIdent, transaction, type Pool, type Queryable } from "../shared/db/db.ts";
import { enqueue } from "../shared/jobs/enqueue.ts";
import type { Waker } from "../shared/scheduler/wake.ts";

export const signupSchema = z.object({ email: z.email(), name: z.string().min(1).max(200) });

export interface SignupOptions {
  pool: Pool;
  /** Schema of Leasehold's tables; default `leasehold`. */
  queueSchema?: string;
  /** Schema of the app's own `users` table; default `public`. */
  appSchema?: string;
  /** Woken after commit, so the email goes out at once instead of at the next cron tick. */
  waker?: Waker;
}

/** The app's own table; a real app has it in its own migrations. */
export async function createUsersTable(db: Queryable, appSchema = "public"): Promise<void> {
  await db.query(`create table if not exists ${schemaIdent(appSchema)}.users (
    id bigint generated always as identity primary key,
    email text not null unique,
    name text not null,
    created_at timestamptz not null default now()
  )`);
}

const UNIQUE_VIOLATION = "23505";

export function createSignupApp({ pool, queueSchema = "leasehold", appSchema = "public", waker }: SignupOptions) {
  const insertUser = `insert into ${schemaIdent(appSchema)}.users (email, name) values ($1, $2) returning id::text`;
  const app = new Hono();

  app.post(
    "/signup",
    validator("json", (body, c) => {
      const parsed = signupSchema.safeParse(body);
      if (parsed.success) return parsed.data;
      const issues = parsed.error.issues.map((i) => ({ path: i.path, message: i.message }));
      const message = issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
      return c.json({ error: { code: "invalid_request", message, issues } }, 400);
    }),
    async (c) => {
      const { email, name } = c.req.valid("json");
      try {
        const created = await transaction(pool, async (tx) => {
          const { rows } = await tx.query<{ id: string }>(insertUser, [email, name]);
          // `tx` joins the enqueue to this transaction; the payload's type comes
          // from sendWelcomeEmail's zod schema ({ to: string; name: string }).
          const job = await enqueue({ db: tx, schema: queueSchema }, sendWelcomeEmail, { to: email, name });
          return { userId: rows[0]!.id, welcomeJobId: job.id };
        });
        waker?.wake(); // after commit: a job the runner cannot see yet is not worth waking for
        return c.json(created, 201);
      } catch (err) {
        if ((err as { code?: unknown }).code === UNIQUE_VIOLATION) {
          return c.json({ error: { code: "email_taken", message: `email: ${email} is already signed up` } }, 409);
        }
        throw err;
      }
    },
  );

  return app;
}
