import { hotQuery, sql, type Store } from "../db/db.ts";
import type { Failure, Lease, SettleBatch, SettleResult, Success } from "./settle-batch.ts";
import { CARRIERS, ids, KINDS, leaseValues, PARTS, settleStatement, tokens, type Part } from "./settle-sql.ts";

/**
 * Settling ends an attempt. Every settle is fenced (invariant 4): it changes
 * only jobs still `running` under the token the caller holds, and only while
 * that lease has not expired. An id missing from the result lost its lease
 * (rescued, re-claimed, or expired) and was left untouched; the caller logs
 * it as a stale settle. A settle keeps the token on the row, so a settle that
 * committed but whose answer was lost can be recognised when it is retried
 * (`settledEarlier`); the rescuer clears the token, so a late settle after a
 * rescue is never mistaken for one of ours.
 */

export type { Failure, Lease, SettleBatch, SettleResult, Sleep, StepRecord, Success } from "./settle-batch.ts";
export { stepKey } from "./settle-batch.ts";
export { JOB_ENDED_CHANNEL } from "./settle-sql.ts";

/**
 * Writes a batch of outcomes in one statement (one round trip, one commit):
 * start marks, successes, failures (each back to `queued` after its retry
 * delay, or `dead` when it was the last attempt or `permanent`), releases,
 * sleeps, and step records. Every ended attempt gets its row. An id may
 * appear in one outcome list only (and in `steps` besides, not with a
 * release).
 */
export async function settleJobs(store: Store, batch: SettleBatch): Promise<SettleResult> {
  const lists = {
    started: batch.started ?? [], succeeded: batch.succeeded ?? [], failed: batch.failed ?? [], released: batch.released ?? [],
    slept: batch.slept ?? [],
  };
  const result: SettleResult = {
    started: new Set(), succeeded: new Set(), failed: new Map(), released: new Set(), slept: new Set(), steps: new Set(),
  };
  const kinds = KINDS.filter((k) => lists[k].length > 0);
  const records = batch.steps ?? [];
  // A record rides with its job's part; a job that has none here is held for it.
  const carried = new Set(kinds.filter((k) => CARRIERS[k]).flatMap((k) => lists[k].map((l) => l.id)));
  const held = [...new Map(records.filter((r) => !carried.has(r.id)).map((r) => [r.id, r])).values()];
  if (kinds.length === 0 && records.length === 0) return result;
  const values = kinds.map((k) => (PARTS[k] as Part<Lease>).values(lists[k]));
  if (held.length > 0) values.push(leaseValues(held));
  if (records.length > 0) {
    values.push([ids(records), records.map((r) => r.seq), records.map((r) => r.name), records.map((r) => r.result), records.map((r) => r.durationMs)]);
  }
  const { rows } = await hotQuery<SettleRow>(
    store, sql(store.schema, settleStatement(kinds, values, held.length > 0, records.length > 0)), values.flat(),
  );
  // Failures and step records are reported written; the other kinds report what their fence refused.
  const refused = new Map<string, Set<string>>();
  for (const r of rows) {
    if (r.kind === "failed") result.failed.set(r.id, r.status as "queued" | "dead");
    else if (r.kind === "steps") result.steps.add(r.id);
    else if (r.kind === "refused") refused.set(r.status!, (refused.get(r.status!) ?? new Set()).add(r.id));
  }
  for (const kind of REPORTS_REFUSED) {
    const off = refused.get(kind);
    for (const { id } of lists[kind]) if (!off?.has(id)) result[kind].add(id);
  }
  return result;
}

type SettleRow = { id: string; kind: "failed" | "steps" | "refused" | "succeeded"; status: string | null };
const REPORTS_REFUSED = ["started", "succeeded", "released", "slept"] as const;

const SETTLED_EARLIER = `
select j.id::text, j.status::text from leasehold.jobs j
join unnest($1::bigint[], $2::uuid[]) as s(id, token) on j.id = s.id
where j.lease_token = s.token and j.status <> 'running'`;

/**
 * Of these leases, the ones a settle of ours already ended (their answer may
 * have been lost with the connection), with the status it left. Asked only
 * when a settle is retried.
 */
export async function settledEarlier(store: Store, leases: readonly Lease[]): Promise<Map<string, string>> {
  if (leases.length === 0) return new Map();
  const { rows } = await store.db.query<{ id: string; status: string }>(sql(store.schema, SETTLED_EARLIER), [
    ids(leases), tokens(leases),
  ]);
  return new Map(rows.map((r) => [r.id, r.status]));
}

/** Marks jobs succeeded and records their attempts (and results). Returns the ids it completed. */
export async function completeJobs(store: Store, leases: readonly Success[]): Promise<Set<string>> {
  return (await settleJobs(store, { succeeded: leases })).succeeded;
}

/** Records failed or timed-out attempts. Returns the new status of each job it changed. */
export async function failJobs(store: Store, failures: readonly Failure[]): Promise<Map<string, "queued" | "dead">> {
  return (await settleJobs(store, { failed: failures })).failed;
}

/** Gives jobs back without charging the attempt. Returns the ids released. */
export async function releaseJobs(store: Store, leases: readonly Lease[]): Promise<Set<string>> {
  return (await settleJobs(store, { released: leases })).released;
}

const EXTEND_LEASE = `
update leasehold.jobs
set lease_expires_at = now() + $3::integer * interval '1 millisecond'
where id = $1::bigint and lease_token = $2::uuid and status = 'running' and lease_expires_at > now()
returning lease_expires_at`;

/**
 * Extends a valid lease to `leaseMs` from now. Returns the new expiry, or
 * null if the lease was already lost or expired.
 */
export async function extendLease(store: Store, lease: Lease, leaseMs: number): Promise<Date | null> {
  const { rows } = await store.db.query<{ lease_expires_at: Date }>(sql(store.schema, EXTEND_LEASE), [
    lease.id,
    lease.leaseToken,
    Math.floor(leaseMs),
  ]);
  return rows[0]?.lease_expires_at ?? null;
}
