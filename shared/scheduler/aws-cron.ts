/**
 * Cron expressions between croner (how recurring jobs are declared: 5 fields,
 * day-of-week 0-7 with 0 and 7 Sunday) and EventBridge Scheduler
 * (`cron(minutes hours day-of-month month day-of-week year)`, day-of-week
 * 1-7 with 1 Sunday, and one of the two day fields `?`).
 */

const shiftDays = (field: string, by: number, wrap: (n: number) => number): string =>
  field.replace(/\d+/g, (n) => String(wrap(Number(n) + by)));

/** `"0 9 * * 1-5"` → `"cron(0 9 ? * 2-6 *)"`. Throws on what EventBridge cannot express. */
export function toAwsCron(cron: string): string {
  const fields = cron.trim().split(/\s+/);
  if (fields.length === 6) {
    if (fields[0] !== "0") throw new Error(`${cron}: EventBridge schedules have minute precision; a seconds field must be 0`);
    fields.shift();
  }
  if (fields.length !== 5) throw new Error(`${cron}: expected 5 cron fields (minute hour day-of-month month day-of-week)`);
  let [minute, hour, dayOfMonth, month, dayOfWeek] = fields as [string, string, string, string, string];
  if (dayOfWeek === "*" || dayOfWeek === "?") dayOfWeek = "?";
  else if (dayOfMonth === "*" || dayOfMonth === "?") dayOfMonth = "?";
  else throw new Error(`${cron}: EventBridge cannot restrict both day-of-month and day-of-week`);
  if (dayOfWeek !== "?" && !/[#L]/.test(dayOfWeek)) dayOfWeek = shiftDays(dayOfWeek, 1, (n) => (n === 8 ? 1 : n));
  return `cron(${minute} ${hour} ${dayOfMonth} ${month} ${dayOfWeek} *)`;
}

/** `"cron(0 9 ? * 2-6 *)"` → `"0 9 * * 1-5"`, for croner (the local runtime's emulation). */
export function fromAwsCron(expression: string): string {
  const body = /^cron\((.*)\)$/.exec(expression.trim())?.[1];
  const fields = body?.trim().split(/\s+/);
  if (!fields || fields.length !== 6) throw new Error(`${expression}: expected cron(<6 fields>)`);
  const [minute, hour, dayOfMonth, month, dayOfWeek, year] = fields as [string, string, string, string, string, string];
  if (year !== "*") throw new Error(`${expression}: the local runtime runs only year "*"`);
  const dow = dayOfWeek === "?" ? "*" : /[#L]/.test(dayOfWeek) ? dayOfWeek : shiftDays(dayOfWeek, -1, (n) => n);
  return `${minute} ${hour} ${dayOfMonth === "?" ? "*" : dayOfMonth} ${month} ${dow}`;
}
