/**
 * Rate limits per key (migration 0012): the rules a job type's and an
 * enqueue's `rateLimit` are held to, and the columns a job carries for the
 * claim to enforce it (shared/lifecycle/rate-limit-sql.ts, `RATE_ADMIT` and `RATE_WRITES`).
 */
import type { Issue, Path } from "./payload.ts";
import { textProblem } from "../text.ts";

/**
 * At most `limit` jobs with the same key start in any window of `periodMs`,
 * across every runner. A job's start is its claim: a runner claims a
 * rate-limited job only into a free slot, so it starts at once. Jobs over
 * the limit wait, uncharged (no attempt, never dead because of it), and
 * start as the window lets them. The key is `key` (a string, or a function of
 * the payload; null: no limit for that job), else the job type's name. Jobs
 * of any type that share a key share its window, each held to its own limit.
 */
export interface RateLimit<P = unknown> {
  limit: number;
  periodMs: number;
  key?: string | ((payload: P) => string | null | undefined);
}

/** An enqueue's own rate limit: its key (and limit or period) replace its type's. */
export interface OwnRateLimit {
  key: string;
  limit?: number;
  periodMs?: number;
}

export const MAX_RATE_KEY_LENGTH = 256;
/** A key's window keeps one timestamp per start it holds: ten thousand at most, rewritten by each claim. */
export const MAX_RATE_LIMIT = 10_000;
/** A week: a period is stored in an integer column of milliseconds. */
export const MAX_RATE_PERIOD_MS = 7 * 24 * 3600_000;

/** A job's rate limit, as the claim reads it: all null when it has none. */
export interface Rate {
  rateKey: string | null;
  rateLimit: number | null;
  ratePeriodMs: number | null;
}

const NONE: Rate = { rateKey: null, rateLimit: null, ratePeriodMs: null };

export const rateLimitProblem = (limit: unknown) =>
  typeof limit === "number" && Number.isInteger(limit) && limit >= 1 && limit <= MAX_RATE_LIMIT ? null : `must be an integer from 1 to ${MAX_RATE_LIMIT}`;

export const ratePeriodProblem = (ms: unknown) =>
  typeof ms === "number" && Number.isInteger(ms) && ms >= 1 && ms <= MAX_RATE_PERIOD_MS ? null : `must be an integer from 1 to ${MAX_RATE_PERIOD_MS}`;

const keyProblem = (key: unknown) =>
  typeof key !== "string" || key.length === 0 || key.length > MAX_RATE_KEY_LENGTH
    ? `must be a string of 1 to ${MAX_RATE_KEY_LENGTH} characters`
    : textProblem(key);

/** A job type's `rateLimit` out of bounds, under `at`. */
export function rateLimitIssues(spec: unknown, at: Path): Issue[] {
  if (spec === undefined) return [];
  if (typeof spec !== "object" || spec === null) return [{ path: [...at, "rateLimit"], message: "must be an object with limit and periodMs" }];
  const { limit, periodMs, key } = spec as Partial<RateLimit>;
  const issues: Issue[] = [];
  const l = rateLimitProblem(limit);
  if (l) issues.push({ path: [...at, "rateLimit", "limit"], message: l });
  const p = ratePeriodProblem(periodMs);
  if (p) issues.push({ path: [...at, "rateLimit", "periodMs"], message: p });
  const k = key === undefined || typeof key === "function" ? null : keyProblem(key);
  if (k) issues.push({ path: [...at, "rateLimit", "key"], message: `${k}, or a function of the payload` });
  return issues;
}

/**
 * The job's rate limit: its type's (`spec`), with the enqueue's own key,
 * limit or period in place of the type's. A type's key function is given the
 * payload as its handler will read it. An enqueue cannot give a rate limit
 * to a type that declares none: its runners would not claim it under one.
 */
export function rateOf(name: string, spec: RateLimit | undefined, payload: unknown, own: OwnRateLimit | undefined, at: Path): Rate | Issue {
  if (own && !spec) {
    return { path: [...at, "rateLimit"], message: `job type ${name} declares no rateLimit: declare one in defineJob, so its runners claim it under the limit` };
  }
  if (!spec) return NONE;
  const key = own?.key ?? (typeof spec.key === "function" ? spec.key(payload) : (spec.key ?? name));
  if (key === null || key === undefined) return NONE;
  const problem = keyProblem(key);
  if (problem) return { path: [...at, "payload"], message: `its rate limit key ${problem}` };
  return { rateKey: key, rateLimit: own?.limit ?? spec.limit, ratePeriodMs: own?.periodMs ?? spec.periodMs };
}
