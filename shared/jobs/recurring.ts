import { Cron } from "croner";
import type { z } from "zod";
import { sql, transaction, type Pool, type Store } from "../db/db.ts";
import { enqueue } from "./enqueue.ts";
import type { JobType } from "./job-types.ts";

/**
 * Recurring jobs: declared in code next to their job type, with a cron
 * expression (5 fields, or 6 with seconds; parsed by croner) and an IANA time
 * zone. Deployed, infra/ makes one EventBridge schedule per recurring job;
 * the scheduler also sleeps toward the next tick, so a tick starts on time.
 * Each tick enqueues exactly once: the tick's row in `recurring_ticks` and
 * the job are written in one transaction, and a second delivery of the same
 * tick (EventBridge retrying, two schedulers, a deploy mid-tick) does nothing.
 */
export interface RecurringJob {
  /** Unique among recurring jobs; the dedupe key of its ticks. */
  name: string;
  type: JobType;
  cron: string;
  timeZone: string;
  payload: unknown;
  /**
   * A tick enqueued more than `lateAfterMs` after its time (the system was
   * down, a delivery was retried for hours): `"skip"` records it and
   * enqueues nothing, `"run"` runs it late. Ticks missed in between are
   * never run in bulk: only the tick delivered is considered.
   */
  missed: "skip" | "run";
  lateAfterMs: number;
}

export const DEFAULT_LATE_AFTER_MS = 5 * 60_000;

export function defineRecurring<S extends z.ZodType>(
  type: JobType<S>,
  spec: { cron: string; timeZone: string; payload: z.input<S>; name?: string; missed?: "skip" | "run"; lateAfterMs?: number },
): RecurringJob {
  // Throws on a bad expression or time zone, at import: a typo fails the deploy's tests.
  new Cron(spec.cron, { timezone: spec.timeZone, paused: true }).nextRun();
  type.schema.parse(spec.payload);
  return {
    name: spec.name ?? type.name,
    type: type as JobType,
    cron: spec.cron,
    timeZone: spec.timeZone,
    payload: spec.payload,
    missed: spec.missed ?? "skip",
    lateAfterMs: spec.lateAfterMs ?? DEFAULT_LATE_AFTER_MS,
  };
}

/** The first tick strictly after `afterMs`. */
export function nextTick(job: RecurringJob, afterMs: number): Date | null {
  return new Cron(job.cron, { timezone: job.timeZone, paused: true }).nextRun(new Date(afterMs));
}

/** The latest tick at or before `atMs` (and after `sinceMs`), or null. */
export function latestTick(job: RecurringJob, sinceMs: number, atMs: number): Date | null {
  let tick: Date | null = null;
  for (let t = nextTick(job, sinceMs); t && t.getTime() <= atMs; t = nextTick(job, t.getTime())) tick = t;
  return tick;
}

const RECORD_TICK = `
insert into leasehold.recurring_ticks (name, tick_at) values ($1::text, $2::timestamptz)
on conflict (name, tick_at) do nothing
returning name`;

const SET_JOB = `update leasehold.recurring_ticks set job_id = $3::bigint where name = $1::text and tick_at = $2::timestamptz`;

export type TickResult = "enqueued" | "duplicate" | "skipped";

/**
 * Enqueues the tick at `tickAt` of `job` unless it was already: exactly once
 * per (name, tick), whoever calls and however often. `nowMs` decides lateness.
 */
export async function enqueueTick(pool: Pool, schema: string, job: RecurringJob, tickAt: Date, nowMs = Date.now()): Promise<TickResult> {
  return transaction(pool, async (tx) => {
    const { rows } = await tx.query(sql(schema, RECORD_TICK), [job.name, tickAt]);
    if (rows.length === 0) return "duplicate";
    if (job.missed === "skip" && nowMs - tickAt.getTime() > job.lateAfterMs) return "skipped";
    const { id } = await enqueue({ db: tx, schema }, job.type, job.payload);
    await tx.query(sql(schema, SET_JOB), [job.name, tickAt, id]);
    return "enqueued";
  });
}

const LAST_TICKS = `
select name, max(tick_at) as tick_at from leasehold.recurring_ticks where name = any($1::text[]) group by name`;

/** Each recurring job with its last enqueued tick and next run: what the API, CLI and dashboard list. */
export async function listRecurring(
  store: Store, jobs: readonly RecurringJob[], nowMs = Date.now(),
): Promise<{ name: string; jobName: string; cron: string; timeZone: string; missed: RecurringJob["missed"]; lastTickAt: Date | null; nextRunAt: Date | null }[]> {
  const { rows } = await store.db.query<{ name: string; tick_at: Date }>(sql(store.schema, LAST_TICKS), [jobs.map((j) => j.name)]);
  const last = new Map(rows.map((r) => [r.name, new Date(r.tick_at)]));
  return jobs.map((j) => ({
    name: j.name, jobName: j.type.name, cron: j.cron, timeZone: j.timeZone, missed: j.missed,
    lastTickAt: last.get(j.name) ?? null, nextRunAt: nextTick(j, nowMs),
  }));
}
