/**
 * Array parameters as Postgres array literals, for statements that take a
 * batch as one array per column (`unnest($1::text[], ...)`). A driver would
 * quote and escape every element through its generic path (node-postgres:
 * two regular expressions and a type dispatch per element, about half the
 * Node time of a 10,000-job enqueue); these write the same literal
 * directly. The value is still a bound parameter: only its encoding is
 * done here.
 *
 * Trailing nulls are left out: `unnest` of several arrays pads the shorter
 * ones with nulls, so a column of nulls (no dedupe key, no group ...) is
 * sent as `{}` and read back as the same nulls. Only for arrays unnested
 * beside one that has every row.
 */

const NEEDS_ESCAPE = /["\\]/;
const ESCAPED = /["\\]/g;

/** An array literal of `values`, trailing nulls left out, each other element written by `element`. */
function arrayLiteral<T>(values: readonly (T | null)[], element: (v: T) => string): string {
  let n = values.length;
  while (n > 0 && values[n - 1] === null) n--;
  let out = "{";
  for (let i = 0; i < n; i++) {
    const v = values[i]!;
    if (i > 0) out += ",";
    out += v === null ? "NULL" : element(v);
  }
  return `${out}}`;
}

/** A text element double-quoted (so "NULL", "" and spaces stay text), `"` and `\` escaped. */
const quoted = (v: string) => (NEEDS_ESCAPE.test(v) ? `"${v.replace(ESCAPED, "\\$&")}"` : `"${v}"`);

/** A finite number, as JavaScript prints it. */
const finite = (v: number) => {
  if (!Number.isFinite(v)) throw new Error(`not a finite number: ${v}`);
  return String(v);
};

/** A `text[]` literal: each element double-quoted, `"` and `\` escaped. */
export const textArray = (values: readonly (string | null)[]): string => arrayLiteral(values, quoted);

/** A numeric array literal (`integer[]`, `smallint[]`, `float8[]`): finite numbers, as JavaScript prints them. */
export const numberArray = (values: readonly (number | null)[]): string => arrayLiteral(values, finite);

/** A JSON array of values each already JSON text (`json_array_elements($n::json)` takes it apart). */
export function jsonArray(jsons: readonly string[]): string {
  return `[${jsons.join(",")}]`;
}
