/**
 * The attempt rules, each written once. A job's state changes in SQL (the
 * claim, the insert that is a claim, the settles) and in TypeScript (the
 * rescue decides per job, then writes): each rule is here in the form each
 * language needs, side by side, and test/structure.test.ts checks that no
 * other file writes one and that both forms agree.
 *
 * - Attempts charged: a death given back uncharged (`owes_attempt`) is
 *   charged with the next attempt that ends charged; never above the maximum.
 * - The last attempt: the attempt counted `attempts` is the last when it
 *   reaches `max_attempts`. Its start is recorded before its handler runs
 *   (`start_first`), so a death before that write cannot refund it.
 * - Retry or dead: an attempt that ends charged ends the job `dead` when it
 *   was the last (or the failure is permanent); otherwise the job is queued
 *   again after its backoff (shared/lifecycle/backoff.ts).
 */

/** SQL: the attempts of job row `j` once an owed attempt is charged with this one. */
export const chargedAttemptsSql = (j: string) => `least(${j}.max_attempts, ${j}.attempts + ${j}.owes_attempt::integer)`;

/** TypeScript: as `chargedAttemptsSql`. */
export function chargedAttempts(attempts: number, owesAttempt: boolean, maxAttempts: number): number {
  return Math.min(maxAttempts, attempts + (owesAttempt ? 1 : 0));
}

/** SQL: whether attempt number `attempts` (an expression) is the last of `maxAttempts`. */
export const lastAttemptSql = (attempts: string, maxAttempts: string) => `(${attempts} >= ${maxAttempts})`;

/** TypeScript: as `lastAttemptSql`. */
export function isLastAttempt(attempt: number, maxAttempts: number): boolean {
  return attempt >= maxAttempts;
}

/**
 * SQL: whether the attempt just claimed on job row `j` (prefix `j.`, or ""
 * for the bare columns of an insert's `returning`) records its start before
 * its handler runs: an earlier death owes it, or it is the last.
 */
export const startsFirstSql = (j = "") => `(${j}start_first or ${lastAttemptSql(`${j}attempts`, `${j}max_attempts`)})`;

/**
 * SQL, the retry-or-dead rule: whether the charged end of the attempt on job
 * row `j` ends the job `dead` (`permanent` a boolean expression).
 */
export const endsDeadSql = (j: string, permanent: string) =>
  `(${permanent} or ${lastAttemptSql(chargedAttemptsSql(j), `${j}.max_attempts`)})`;

/** TypeScript, the retry-or-dead rule: as `endsDeadSql`, given the attempts charged. */
export function retryOrDead(charged: number, maxAttempts: number, permanent = false): "retry" | "dead" {
  return permanent || isLastAttempt(charged, maxAttempts) ? "dead" : "retry";
}
