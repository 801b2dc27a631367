/**
 * EventBridge schedule expressions, as far as the local runtime needs them:
 * `rate(N unit)` (minute, hour, day — plus second, which AWS lacks but tests
 * want) and the every-minute `cron(...)`. Anything else is rejected with a
 * clear error so a typo in config fails at startup, not silently.
 */
import { randomUUID } from "node:crypto";
import type { ScheduledEvent } from "aws-lambda";
import { LOCAL_ACCOUNT_ID } from "./lambda-env.ts";

export interface Schedule {
  expression: string;
  intervalMs: number;
}

const MINUTE_MS = 60_000;
const UNIT_MS: Record<string, number> = {
  second: 1_000,
  minute: MINUTE_MS,
  hour: 3_600_000,
  day: 86_400_000,
};

/** Parses a schedule expression; throws an Error naming the expression and what is wrong with it. */
export function parseSchedule(expression: string): Schedule {
  const rate = /^rate\(\s*(\S+)\s+(\S+)\s*\)$/.exec(expression.trim());
  if (rate) return parseRate(expression, rate[1] ?? "", rate[2] ?? "");
  const cron = /^cron\((.*)\)$/.exec(expression.trim());
  if (cron) return parseCron(expression, cron[1] ?? "");
  throw new Error(`Invalid schedule "${expression}": expected rate(<value> <unit>) or cron(<6 fields>)`);
}

function parseRate(expression: string, valueText: string, unitText: string): Schedule {
  if (!/^[1-9]\d*$/.test(valueText)) {
    throw new Error(`Invalid schedule "${expression}": the rate value must be a positive whole number, got "${valueText}"`);
  }
  const value = Number(valueText);
  const plural = unitText.endsWith("s");
  const unit = plural ? unitText.slice(0, -1) : unitText;
  const unitMs = UNIT_MS[unit];
  if (unitMs === undefined) {
    throw new Error(`Invalid schedule "${expression}": unknown unit "${unitText}" (use ${Object.keys(UNIT_MS).join(", ")})`);
  }
  if (plural !== value > 1) {
    const expected = value > 1 ? `${unit}s` : unit;
    throw new Error(`Invalid schedule "${expression}": a rate of ${value} takes the unit "${expected}", as in rate(${value} ${expected})`);
  }
  return { expression, intervalMs: value * unitMs };
}

const EVERY = new Set(["*", "0/1", "*/1"]);

/** Only the every-minute cron is supported locally: cron(* * * * ? *) and its spellings. */
function parseCron(expression: string, body: string): Schedule {
  const fields = body.trim().split(/\s+/);
  if (fields.length !== 6) {
    throw new Error(`Invalid schedule "${expression}": cron() takes 6 fields (minutes hours day-of-month month day-of-week year), got ${fields.length}`);
  }
  const [minutes, hours, dayOfMonth, month, dayOfWeek, year] = fields as [string, string, string, string, string, string];
  if (!(dayOfMonth === "?" || dayOfWeek === "?")) {
    throw new Error(`Invalid schedule "${expression}": one of day-of-month or day-of-week must be "?"`);
  }
  const everyMinute =
    EVERY.has(minutes) && hours === "*" && ["*", "?"].includes(dayOfMonth) && month === "*" && ["*", "?"].includes(dayOfWeek) && year === "*";
  if (!everyMinute) {
    throw new Error(`Unsupported schedule "${expression}": the local runtime runs only every-minute cron(* * * * ? *); use rate(...)`);
  }
  return { expression, intervalMs: MINUTE_MS };
}

/** The event EventBridge delivers to a scheduled Lambda target. */
export function scheduledEvent(functionName: string, region: string, now = new Date(), accountId = LOCAL_ACCOUNT_ID): ScheduledEvent {
  return {
    version: "0",
    id: randomUUID(),
    "detail-type": "Scheduled Event",
    source: "aws.events",
    account: accountId,
    time: now.toISOString().replace(/\.\d{3}Z$/, "Z"),
    region,
    resources: [`arn:aws:events:${region}:${accountId}:rule/${functionName}-schedule`],
    detail: {},
  };
}

export interface ScheduledFunction {
  name: string;
  intervalMs: number;
}

/** Fires `fire(name)` every interval for each function; first fire after one interval, like EventBridge. Returns a stop function. */
export function startTicker(functions: ScheduledFunction[], fire: (name: string) => void): () => void {
  const timers = functions.map((fn) => setInterval(() => fire(fn.name), fn.intervalMs));
  return () => timers.forEach((timer) => clearInterval(timer));
}
