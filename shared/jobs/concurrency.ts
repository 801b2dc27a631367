import type { JobType } from "./job-types.ts";
import type { Issue, Path } from "./payload.ts";
import { textProblem } from "../text.ts";

/** The longest concurrency key, as the longest group. */
export const MAX_CONCURRENCY_KEY_LENGTH = 256;
export const MAX_CONCURRENCY_LIMIT = 1_000_000;

/** A job type's `concurrency` out of bounds, under `at`. */
export function concurrencyIssues(type: JobType, at: Path): Issue[] {
  const c = type.concurrency;
  if (c === undefined) return [];
  const issues: Issue[] = [];
  if (!Number.isInteger(c.limit) || c.limit < 1 || c.limit > MAX_CONCURRENCY_LIMIT) {
    issues.push({ path: [...at, "concurrency", "limit"], message: `must be an integer from 1 to ${MAX_CONCURRENCY_LIMIT}` });
  }
  if (c.key !== undefined && typeof c.key !== "function") {
    issues.push({ path: [...at, "concurrency", "key"], message: "must be a function of the payload" });
  }
  return issues;
}

/** A job's share and limit, as the claim reads them (migration 0007). */
export interface Fairness {
  /** The group the fair claim takes it in: its group, else its concurrency key, else '' (ungrouped, or opted out). */
  fairGroup: string;
  concurrencyKey: string | null;
  concurrencyLimit: number | null;
}

/**
 * The job's share and limit: its concurrency key is the type's
 * `concurrency.key` of the payload, else its group; null when the type has no
 * limit (or the job no key). Returns an issue for a key that is not storable text.
 */
export function fairnessOf(type: JobType, payload: unknown, group: string | null, at: Path): Fairness | Issue {
  let concurrencyKey: string | null = null;
  if (type.concurrency) {
    const key = type.concurrency.key ? type.concurrency.key(payload) : group;
    if (key !== null && key !== undefined) {
      const problem = typeof key !== "string" || key.length === 0 || key.length > MAX_CONCURRENCY_KEY_LENGTH
        ? `must be a string of 1 to ${MAX_CONCURRENCY_KEY_LENGTH} characters` : textProblem(key);
      if (problem) return { path: [...at, "payload"], message: `its concurrency key ${problem}` };
      concurrencyKey = key;
    }
  }
  return {
    fairGroup: type.fair === false ? "" : (group ?? concurrencyKey ?? ""),
    concurrencyKey,
    concurrencyLimit: concurrencyKey === null ? null : type.concurrency!.limit,
  };
}
