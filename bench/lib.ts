import { existsSync, readFileSync } from "node:fs";
import type { LedgerSummary, HopStats } from "./stats.ts";

/** What the driver needs of each library under test. (`version` is read lazily: worker children run from a bundle elsewhere.) */

export type LibId = "leasehold" | "graphile" | "pgboss";
export const LIB_IDS: readonly LibId[] = ["leasehold", "graphile", "pgboss"];

/** The one thing the driver asks of a database connection (a pg Client or Pool). */
export interface SqlClient {
  query<R = any>(text: string, values?: unknown[]): Promise<{ rows: R[] }>;
}

/** Enqueues into one queue of a freshly installed library. */
export interface Producer {
  /** Builds the n-job batch (jobs `from` … `from + n - 1`) now and returns the single call that enqueues it (the caller times only the call). */
  prepareBatch(n: number, from?: number): () => Promise<unknown>;
  /** Enqueues job `i` in its own call (and implicit transaction). */
  enqueueOne(i: number): Promise<unknown>;
  /** Jobs of this queue now in the database. */
  count(): Promise<number>;
  close(): Promise<void>;
}

export interface Lib {
  id: LibId;
  name: string;
  version: string;
  /** The configuration under test, in words. */
  settings: string;
  /** Installs the library's schema in an empty database and opens a producer on `queue`. */
  open(dsn: string, queue: string): Promise<Producer>;
  /** Jobs of `queue` not yet done, read on the driver's own connection to the library's database. */
  remaining(db: SqlClient, queue: string): Promise<number>;
  /** Leasehold only: id range of the jobs the child must execute. */
  firstId?(dsn: string, queue: string): Promise<number>;
}

/** What a worker child reports after executing a queued batch. */
export interface ExecResult {
  /** From the worker's start call to its first handler's start: the same event for every library. */
  startup_ms: number;
  /** A peer's own "started" moment (its start call returning), before its first job; Leasehold has no separate one. */
  ready_ms?: number;
  handlers_done_ms: number;
  exec_ms: number;
  jobs_per_s: number;
  ledger: LedgerSummary;
  db_after: Record<string, number>;
  /** The database confirms every job completed exactly once (no retries, no errors). */
  db_ok: boolean;
  peak_rss_mib: number;
  extra?: Record<string, unknown>;
}

export interface HopResult extends HopStats {
  chain_ms: number;
  ledger: LedgerSummary;
  db_ok: boolean;
  peak_rss_mib: number;
}

/** The installed version of `name`: a peer's in bench/node_modules, else the main install's. */
export function pkgVersion(name: string): string {
  const peer = new URL(`./node_modules/${name}/package.json`, import.meta.url);
  const url = existsSync(peer) ? peer : new URL(`../node_modules/${name}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(url, "utf8")) as { version: string }).version;
}
