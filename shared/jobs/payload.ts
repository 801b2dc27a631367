/**
 * A payload as the JSON a job stores, refused unless JSON keeps it exactly:
 * what the handler gets back must be what was given. Only JSON data passes:
 * null, booleans, finite numbers, strings that are valid Unicode without NUL,
 * plain arrays and plain objects, nested at most `MAX_PAYLOAD_DEPTH` levels.
 */
import { textProblem } from "../text.ts";

/** Bytes of UTF-8 JSON a payload may take unless configured otherwise: the API's body limit. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;
/** Deeper payloads are refused: JSON this deep is a mistake or an attack, and Postgres may not parse it. */
export const MAX_PAYLOAD_DEPTH = 64;
/** One payload reports at most this many problems. */
const MAX_ISSUES = 20;

export type Path = (string | number)[];
export interface Issue {
  path: Path;
  message: string;
}

const DATE_ADVICE = "send dates as ISO strings (z.iso.datetime(), or z.coerce.date() for a Date in the handler)";

/** Why a non-plain object is not JSON data. */
function objectProblem(value: object): string | null {
  if (Array.isArray(value)) return null;
  const proto = Object.getPrototypeOf(value) as object | null;
  // A plain object's prototype is Object.prototype (of any realm) or null.
  if (proto === null || Object.getPrototypeOf(proto) === null) return null;
  if (value instanceof Date) return `a Date is not JSON: ${DATE_ADVICE}`;
  if (value instanceof Map || value instanceof Set) return `a ${value.constructor.name} is not JSON: use a plain object or an array`;
  const name = (value.constructor as { name?: unknown } | undefined)?.name;
  return `${typeof name === "string" && name ? `a ${name}` : "an object with a prototype"} is not JSON: use plain objects and arrays`;
}

/** Why a primitive is not JSON data, or null when it is. */
function primitiveProblem(value: unknown, inArray: boolean): string | null {
  switch (typeof value) {
    case "string":
      return textProblem(value);
    case "number":
      return Number.isFinite(value) ? null : `${value} is not JSON: use a finite number`;
    case "bigint":
      return "a bigint is not JSON: send it as a string or a number";
    case "symbol":
      return "a symbol is not JSON";
    case "function":
      return "a function is not JSON";
    case "undefined":
      return inArray ? "undefined in an array is not JSON (it would be stored as null): use null" : null;
    default:
      return null;
  }
}

/** The problems that keep `payload` from surviving JSON exactly, each with its path under `at`. */
function problems(payload: unknown, at: Path): Issue[] {
  const issues: Issue[] = [];
  const path = [...at];
  const ancestors = new Set<object>();
  const report = (message: string, where: Path = path): void => {
    issues.push({ path: [...where], message });
  };

  const visit = (value: unknown, depth: number, inArray: boolean): void => {
    if (issues.length >= MAX_ISSUES) return;
    if (value === null || typeof value !== "object") {
      const problem = primitiveProblem(value, inArray);
      if (problem) report(problem);
      return;
    }
    if (depth >= MAX_PAYLOAD_DEPTH) return report(`nested deeper than ${MAX_PAYLOAD_DEPTH} levels`, at);
    if (ancestors.has(value)) return report("refers to itself (a cycle) and is not JSON");
    const problem = objectProblem(value);
    if (problem) return report(problem);
    if (Object.getOwnPropertySymbols(value).length > 0) report("has symbol keys, which are not JSON");
    ancestors.add(value);
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        path.push(i);
        if (i in value) visit(value[i], depth + 1, true);
        else report("an empty array slot is not JSON (it would be stored as null): use null");
        path.pop();
      }
    } else {
      for (const key of Object.keys(value)) {
        path.push(key);
        const keyProblem = textProblem(key);
        if (keyProblem) report(`key ${keyProblem}`);
        visit((value as Record<string, unknown>)[key], depth + 1, false);
        path.pop();
      }
    }
    ancestors.delete(value);
  };

  try {
    visit(payload, 0, false);
  } catch (err) {
    report(`cannot be read: ${err instanceof Error ? err.message : String(err)}`, at);
  }
  return issues;
}

/** Bytes of `s` as UTF-8; `s` holds no lone surrogate, so a surrogate pair is 4 bytes. */
function utf8Bytes(s: string): number {
  let bytes = s.length;
  for (let i = 0; i < s.length; i++) {
    const unit = s.charCodeAt(i);
    if (unit >= 0x80) bytes += unit < 0x800 || (unit >= 0xd800 && unit <= 0xdfff) ? 1 : 2;
  }
  return bytes;
}

/** What may make text unstorable; most text has none of it, and `textProblem` need not look. */
const SUSPECT_TEXT = /[\u0000\uD800-\uDFFF]/;
const storable = (s: string) => !SUSPECT_TEXT.test(s) || textProblem(s) === null;

/** The ancestors of the value `exact` is at; module-level, so a call allocates nothing. */
const exactAncestors: object[] = [];

/**
 * Whether JSON gives `value` back exactly: JSON data (as `problems` finds
 * none) that JSON.parse(JSON.stringify(value)) rebuilds as an equal value,
 * with the same keys in the same order and the same prototypes. Unlike
 * `problems` it keeps no path, makes no closure and stops at the first
 * doubt: a false says only "take the careful path", never what is wrong.
 * Not exact (though possibly valid): a key whose value is undefined
 * (dropped), -0 (read back as 0), an object without Object.prototype or an
 * array without Array.prototype (read back with them), a non-enumerable or
 * symbol key, or an array's keys beside its indexes (all dropped).
 */
function exact(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case "string":
      return storable(value);
    case "number":
      return Number.isFinite(value) && !Object.is(value, -0);
    case "boolean":
      return true;
    case "object":
      break;
    default:
      return false;
  }
  if (value === null) return true;
  if (depth >= MAX_PAYLOAD_DEPTH || exactAncestors.includes(value)) return false;
  exactAncestors.push(value);
  try {
    // Own keys beyond the ones JSON writes (symbols, non-enumerable ones a
    // schema could still read, an array's extra keys) make it not exact.
    const own = Reflect.ownKeys(value).length;
    if (Array.isArray(value)) {
      // An array's own keys: its indexes (none missing), and `length`.
      if (Object.getPrototypeOf(value) !== Array.prototype || own !== value.length + 1) return false;
      for (let i = 0; i < value.length; i++) if (!exact(value[i], depth + 1)) return false;
      return true;
    }
    if (Object.getPrototypeOf(value) !== Object.prototype) return false;
    let enumerable = 0;
    for (const key in value) {
      if (!Object.hasOwn(value, key)) return false;
      if (!storable(key)) return false;
      const v = (value as Record<string, unknown>)[key];
      if (v === undefined || !exact(v, depth + 1)) return false;
      enumerable++;
    }
    return enumerable === own;
  } catch {
    return false;
  } finally {
    exactAncestors.pop();
  }
}

/**
 * The payload as the JSON to store, or the issues that refuse it. `at` is the
 * payload's own path, e.g. `["jobs", 3, "payload"]`. A payload left out is
 * stored as JSON null (and must pass its schema as null). `exact`: JSON
 * gives the payload back exactly (see `exact` above), so what the handler
 * reads is an equal value, not just one that passed the same checks.
 */
export function payloadJson(payload: unknown, at: Path, maxBytes: number): { json: string; exact: boolean } | { issues: Issue[] } {
  const isExact = payload !== undefined && exact(payload, 0);
  if (!isExact) {
    const issues = problems(payload, at);
    if (issues.length > 0) return { issues };
  }
  const json = JSON.stringify(payload ?? null);
  // At most 3 UTF-8 bytes per UTF-16 code unit: short JSON needs no count.
  if (json.length * 3 > maxBytes) {
    const bytes = utf8Bytes(json);
    if (bytes > maxBytes) return { issues: [{ path: at, message: `is ${bytes} bytes of JSON; at most ${maxBytes} are allowed` }] };
  }
  return { json, exact: isExact };
}
