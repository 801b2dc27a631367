/**
 * What text Postgres stores exactly: valid Unicode without the NUL character.
 * A lone UTF-16 surrogate has no UTF-8 form (drivers send it as U+FFFD, so two
 * different strings would be stored as one), and neither `text` nor `jsonb`
 * can hold U+0000.
 */

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why `s` cannot be stored as it is, or null when it can. */
export function textProblem(s: string): string | null {
  if (s.includes("\u0000")) return "must not contain the NUL character (U+0000)";
  if (LONE_SURROGATE.test(s)) return "must be valid Unicode (it has a lone UTF-16 surrogate)";
  return null;
}
