import { usageError } from "./errors.ts";

/** Parsers for option values: each names the option it was given for when it refuses. */

const MAX_JOB_ID = 9223372036854775807n;

/** A job id: a positive Postgres bigint, as a string. */
export function parseJobId(value: string | undefined): string {
  if (value === undefined) throw usageError("missing job id");
  if (!/^[1-9][0-9]{0,18}$/.test(value) || BigInt(value) > MAX_JOB_ID) {
    throw usageError(`invalid job id ${JSON.stringify(value)}: ids are positive integers`);
  }
  return value;
}

export function parseInteger(option: string, value: string, min: number, max: number): number {
  const n = /^-?[0-9]+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw usageError(`--${option} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return n;
}

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** A duration with its unit, `1500ms`, `30s`, `5m`, `2h`, `7d`, in milliseconds. A bare number is refused. */
export function parseDurationMs(option: string, value: string): number {
  const match = /^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)$/.exec(value.trim());
  if (!match) throw usageError(`--${option} must be a number with a unit (ms, s, m, h, d), like 30s or 7d; got ${JSON.stringify(value)}`);
  return Math.round(Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]);
}

/** Exactly `count` positionals, named for the message when some are missing or extra. */
export function expectPositionals(positionals: string[], names: string[]): string[] {
  if (positionals.length < names.length) throw usageError(`missing ${names.slice(positionals.length).map((n) => `<${n}>`).join(" ")}`);
  if (positionals.length > names.length) throw usageError(`unexpected argument ${JSON.stringify(positionals[names.length])}`);
  return positionals;
}
