/** Human output: a small table, aligned key-value lists, times and ages. */

export interface Column<T> {
  header: string;
  value: (row: T) => string;
  align?: "left" | "right";
  /** Longer cells are cut with an ellipsis. */
  maxWidth?: number;
}

const oneLine = (s: string) => s.replace(/\s+/g, " ");
const cut = (s: string, max: number) => (s.length > max ? `${s.slice(0, max - 1)}…` : s);

/** Rows under a header, columns padded to their widest cell, two spaces apart. */
export function table<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  const cells = rows.map((row) => columns.map((c) => cut(oneLine(c.value(row)), c.maxWidth ?? 60)));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((r) => r[i]!.length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => (columns[i]!.align === "right" ? v.padStart(widths[i]!) : v.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(columns.map((c) => c.header)), ...cells.map(line)].join("\n");
}

/** `key  value` lines with the keys padded to one width. */
export function fields(pairs: readonly [string, string][]): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join("\n");
}

/** A time in UTC to the second, or `-`. */
export function when(date: Date | null): string {
  return date ? `${date.toISOString().slice(0, 19).replace("T", " ")}Z` : "-";
}

/** A number of seconds as `45s`, `12m 5s`, `3h 20m`, `2d 4h`. */
export function age(seconds: number): string {
  const s = Math.floor(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

/** A value or `-` when absent. */
export const orDash = (value: string | number | null | undefined) => (value === null || value === undefined ? "-" : String(value));
