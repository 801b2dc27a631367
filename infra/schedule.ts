/**
 * Validates EventBridge Scheduler expressions (`rate(...)`, `cron(...)`), so
 * a bad `config.scheduler.schedule` fails in tests, not halfway through a
 * deploy. Plain TypeScript: no SST globals, importable from tests.
 * Rules: https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html
 */

export type Schedule =
  | { kind: "rate"; value: number; unit: "minute" | "hour" | "day"; seconds: number }
  | { kind: "cron"; fields: string[] };

const UNIT_SECONDS = { minute: 60, hour: 3_600, day: 86_400 } as const;

const MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

interface FieldRule {
  name: string;
  min: number;
  max: number;
  names?: string[];
  /** Extra single-field forms allowed besides numbers, ranges, lists, steps. */
  special?: RegExp;
}

const CRON_FIELDS: FieldRule[] = [
  { name: "minutes", min: 0, max: 59 },
  { name: "hours", min: 0, max: 23 },
  { name: "day-of-month", min: 1, max: 31, special: /^(\?|L|LW|\d{1,2}W)$/ },
  { name: "month", min: 1, max: 12, names: MONTHS },
  { name: "day-of-week", min: 1, max: 7, names: DAYS, special: /^(\?|L|[1-7]L|[A-Z]{3}L|[1-7]#[1-5]|[A-Z]{3}#[1-5])$/ },
  { name: "year", min: 1970, max: 2199 },
];

/** Parses a schedule expression, or throws an Error saying what is wrong. */
export function parseSchedule(expression: string): Schedule {
  const rate = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
  if (rate) {
    const value = Number(rate[1]);
    const word = rate[2]!;
    const unit = word.replace(/s$/, "") as keyof typeof UNIT_SECONDS;
    if (value < 1) throw new Error(`${expression}: the rate must be at least 1`);
    if ((value === 1) !== (word === unit)) {
      throw new Error(`${expression}: use "${unit}" for 1 and "${unit}s" for more`);
    }
    return { kind: "rate", value, unit, seconds: value * UNIT_SECONDS[unit] };
  }
  const cron = /^cron\((.*)\)$/.exec(expression);
  if (cron) {
    const fields = cron[1]!.trim().split(/\s+/);
    if (fields.length !== 6) {
      throw new Error(`${expression}: a cron expression has 6 fields (minutes hours day-of-month month day-of-week year)`);
    }
    fields.forEach((field, i) => checkField(expression, field, CRON_FIELDS[i]!));
    const [, , dayOfMonth, , dayOfWeek] = fields;
    if ((dayOfMonth === "?") === (dayOfWeek === "?")) {
      throw new Error(`${expression}: exactly one of day-of-month and day-of-week must be "?"`);
    }
    return { kind: "cron", fields };
  }
  throw new Error(`${expression}: expected rate(<n> <unit>) or cron(<6 fields>)`);
}

export function isValidSchedule(expression: string): boolean {
  try {
    parseSchedule(expression);
    return true;
  } catch {
    return false;
  }
}

function checkField(expression: string, field: string, rule: FieldRule): void {
  const fail = (why: string): never => {
    throw new Error(`${expression}: ${rule.name} field "${field}" ${why}`);
  };
  const value = (text: string): number => {
    const named = rule.names?.indexOf(text.toUpperCase()) ?? -1;
    const n = named >= 0 ? named + 1 : /^\d+$/.test(text) ? Number(text) : NaN;
    if (!(n >= rule.min && n <= rule.max)) fail(`has "${text}" outside ${rule.min}-${rule.max}`);
    return n;
  };
  for (const part of field.split(",")) {
    if (rule.special?.test(part.toUpperCase())) {
      if (part === "?" && field !== "?") fail(`cannot combine "?" with other values`);
      continue;
    }
    const [range, step, ...rest] = part.split("/");
    if (rest.length > 0 || range === undefined || range === "") fail("is malformed");
    if (step !== undefined && !(/^\d+$/.test(step) && Number(step) >= 1)) fail(`has a bad step "${step}"`);
    if (range === "*") continue;
    const bounds = range!.split("-");
    if (bounds.length > 2) fail("is malformed");
    const [from, to] = bounds.map(value);
    if (to !== undefined && from! > to) fail(`has a backwards range`);
  }
}
