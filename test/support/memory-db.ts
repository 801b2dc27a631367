import { retryOrDead } from "../../shared/lifecycle/attempt-rules.ts";
import type { Queryable, QueryResult } from "../../shared/db/db.ts";
import type { Clock } from "../../shared/runner/clock.ts";

/**
 * A database answerer in memory, for the runner's parts on a manual clock:
 * it answers the statements a runner sends (claim, settle, the look-up after
 * a lost write, lease renewal, the look for suspects) from a table of jobs in
 * a Map, with leases that run out on the clock, so the producer and the
 * completer are tested with no Postgres and no sleeping. It keeps each
 * statement it was sent, and `before` may fail or hold any of them (a lost
 * connection, a stall). The rules are the runner's view of the queue's,
 * simplified (no groups, limits, steps or owed attempts): a settle lands only
 * with its lease's token while the lease lasts.
 */

export type StatementKind = "claim" | "settle" | "settledEarlier" | "extend" | "suspectWaiting" | "rateOpens";

export interface MemoryJob {
  id: string;
  queue: string;
  name: string;
  payload: unknown;
  status: "queued" | "running" | "succeeded" | "dead";
  attempts: number;
  runs: number;
  maxAttempts: number;
  leaseMs: number;
  backoffMs: number;
  token?: string;
  /** Clock time the lease runs out. */
  leaseEndsAt?: number;
  started?: boolean;
}

export interface Sent {
  kind: StatementKind;
  at: number;
  values: unknown[];
  /** For a settle: the ids in each part. */
  parts?: Partial<Record<SettleKind, string[]>>;
}

type SettleKind = "started" | "succeeded" | "failed" | "released" | "slept";
/** Each part's CTE in the settle statement (shared/lifecycle/settle-sql.ts). */
const CTE: Record<SettleKind, string> = { started: "marked", succeeded: "done", failed: "failed", released: "released", slept: "slept" };
/** The settle statement's parts in their order, with how many bound arrays each takes (shared/lifecycle/settle.ts). */
const PARTS: [SettleKind, number][] = [["started", 2], ["succeeded", 4], ["failed", 7], ["released", 2], ["slept", 4]];

/** An error the runner takes for a lost connection. */
export const connectionLost = () => Object.assign(new Error("Connection terminated unexpectedly"), { code: "ECONNRESET" });

export class MemoryDb implements Queryable {
  readonly jobs = new Map<string, MemoryJob>();
  readonly sent: Sent[] = [];
  /** Before each statement is applied: throw to fail it, or wait to stall it. */
  before?: (s: Sent) => void | Promise<void>;
  /** After a statement is applied, before its answer: throw to lose the answer (the write stands). */
  after?: (s: Sent) => void | Promise<void>;
  private nextId = 1;
  private nextToken = 1;

  constructor(private readonly clock: Clock) {}

  /** Queued jobs, returning their ids. */
  add(n: number, job: Partial<MemoryJob> = {}): string[] {
    return Array.from({ length: n }, () => {
      const id = String(this.nextId++);
      this.jobs.set(id, {
        id, queue: "q", name: "t", payload: {}, status: "queued", attempts: 0, runs: 0, maxAttempts: 3, leaseMs: 10_000, backoffMs: 0, ...job,
      });
      return id;
    });
  }

  /** The statements sent of one kind. */
  of(kind: StatementKind): Sent[] {
    return this.sent.filter((s) => s.kind === kind);
  }

  async query<R>(text: string, values: unknown[] = []): Promise<QueryResult<R>> {
    const s: Sent = { kind: kindOf(text), at: this.clock.now(), values };
    if (s.kind === "settle") s.parts = settleParts(text, values);
    this.sent.push(s);
    await this.before?.(s);
    const rows = this.apply(s) as R[];
    await this.after?.(s);
    return { rows, rowCount: rows.length } as QueryResult<R>;
  }

  private apply(s: Sent): unknown[] {
    const v = s.values;
    switch (s.kind) {
      case "claim": return this.claim(v[0] as string, v[1] as number, v[2] as number, v[4] as string[] | null);
      case "settle": return this.settle(s.parts!, v);
      case "settledEarlier": {
        const [ids, tokens] = [elements(v[0]), elements(v[1])];
        return ids.flatMap((id, i) => {
          const j = this.jobs.get(String(id));
          return j && j.token === tokens[i] && j.status !== "running" ? [{ id: j.id, status: j.status }] : [];
        });
      }
      case "extend": {
        const j = this.live(String(v[0]), v[1] as string);
        if (!j) return [];
        j.leaseEndsAt = this.clock.now() + (v[2] as number);
        return [{ lease_expires_at: new Date(j.leaseEndsAt) }];
      }
      case "suspectWaiting": return [{ waiting: false }];
      case "rateOpens": return [{ opens_at: null, now: new Date(this.clock.now()) }];
    }
  }

  private claim(queue: string, limit: number, maxLeaseMs: number, names: string[] | null): unknown[] {
    const picked = [...this.jobs.values()]
      .filter((j) => j.status === "queued" && j.queue === queue && j.leaseMs <= maxLeaseMs && (!names || names.includes(j.name)))
      .slice(0, limit);
    return picked.map((j, ord) => {
      Object.assign(j, {
        status: "running", attempts: j.attempts + 1, runs: j.runs + 1, started: false,
        token: `00000000-0000-0000-0000-${String(this.nextToken++).padStart(12, "0")}`, leaseEndsAt: this.clock.now() + j.leaseMs,
      });
      return {
        id: j.id, name: j.name, payload: j.payload, attempts: j.attempts, runs: j.runs, start_first: false,
        max_attempts: j.maxAttempts, lease_ms: j.leaseMs, backoff_ms: j.backoffMs, lease_token: j.token,
        // As the claim statement: what it saw on its first row only.
        ord, last_group: null, group_count: ord === 0 ? 1 : null, suspects_waiting: ord === 0 ? false : null,
      };
    });
  }

  private settle(parts: Partial<Record<SettleKind, string[]>>, v: unknown[]): unknown[] {
    const rows: { id: string; kind: SettleKind | "refused"; status: string | null }[] = [];
    let at = 0;
    for (const [kind, width] of PARTS) {
      const ids = parts[kind];
      if (!ids) continue;
      const tokens = elements(v[at + 1]);
      const permanent = kind === "failed" ? (v[at + 5] as boolean[]) : [];
      ids.forEach((id, i) => {
        const j = this.live(id, tokens[i]!);
        // A failure reports what it wrote; the other parts report what their fence refused.
        if (!j) return void (kind === "failed" || rows.push({ id, kind: "refused", status: kind }));
        if (kind === "started") j.started = true;
        else if (kind === "succeeded") j.status = "succeeded";
        else if (kind === "failed") j.status = retryOrDead(j.attempts, j.maxAttempts, permanent[i]) === "dead" ? "dead" : "queued";
        else {
          j.status = "queued";
          j.attempts--;
        }
        if (kind === "failed") rows.push({ id, kind, status: j.status });
      });
      at += width;
    }
    return rows;
  }

  /** A job whose lease is this token's and has not run out. */
  private live(id: string, token: string): MemoryJob | undefined {
    const j = this.jobs.get(id);
    return j && j.status === "running" && j.token === token && this.clock.now() < j.leaseEndsAt! ? j : undefined;
  }
}

function kindOf(text: string): StatementKind {
  if (text.includes("suspects_waiting")) return "claim";
  if (text.includes("as kind")) return "settle";
  if (text.includes("j.status <> 'running'")) return "settledEarlier";
  if (text.includes("set lease_expires_at = now() +")) return "extend";
  if (text.includes("opens_at")) return "rateOpens";
  if (/^\s*select exists/.test(text)) return "suspectWaiting";
  throw new Error(`the in-memory database does not answer: ${text.slice(0, 80)}`);
}

function settleParts(text: string, v: unknown[]): Partial<Record<SettleKind, string[]>> {
  const parts: Partial<Record<SettleKind, string[]>> = {};
  let at = 0;
  for (const [kind, width] of PARTS) {
    if (!text.includes(`${CTE[kind]} as (`)) continue;
    parts[kind] = elements(v[at]);
    at += width;
  }
  return parts;
}

/** A bound array of ids or tokens: the array, or the array literal the settle writes for bare elements (`{1,2}`). */
function elements(v: unknown): string[] {
  if (typeof v === "string") return v === "{}" ? [] : v.slice(1, -1).split(",");
  return (v as unknown[]).map(String);
}
