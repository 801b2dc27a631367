import { HANDLER_LINE } from "../functions/job-output.ts";

/**
 * What `leasehold dev` (and `npm run dev`) print of the functions' output:
 * every line a handler writes, labelled by its job (functions/job-output.ts),
 * and one line per job that ends dead, counting its runs from the record.
 * `verbose` adds every other line the functions log, behind the function's name.
 */
export function devOutput(verbose: boolean, print: (line: string) => void = console.log): (fn: string, line: string) => void {
  return (fn, line) => {
    if (verbose) print(`[${fn}] ${line}`);
    else if (HANDLER_LINE.test(line)) print(line);
    const death = deathSummary(line);
    if (death) print(death);
  };
}

/** The words for how runs ended, in the order a summary names them. */
const ENDINGS: readonly [outcome: string, one: string, many: string][] = [
  ["failed", "failure", "failures"],
  ["timeout", "timeout", "timeouts"],
  ["lease_expired", "rescue", "rescues"],
  ["released", "release", "releases"],
];

/** "2 rescues and 1 release": how many runs ended which way, from a dead job's reasons (`outcome: error`, one per run). */
export function countEndings(reasons: readonly string[]): string {
  const outcomes = reasons.map((r) => r.slice(0, r.indexOf(":") < 0 ? r.length : r.indexOf(":")));
  const known = new Set(ENDINGS.map(([outcome]) => outcome));
  const parts = [...ENDINGS, ...[...new Set(outcomes)].filter((o) => !known.has(o)).map((o) => [o, o, o] as const)]
    .map(([outcome, one, many]) => [outcomes.filter((o) => o === outcome).length, one, many] as const)
    .filter(([n]) => n > 0)
    .map(([n, one, many]) => `${n} ${n === 1 ? one : many}`);
  if (parts.length === 0) return "no run";
  return parts.length === 1 ? parts[0]! : `${parts.slice(0, -1).join(", ")} and ${parts.at(-1)}`;
}

/** One line for a `"job dead"` log line (the functions' JSON), else null. */
export function deathSummary(line: string): string | null {
  if (!line.includes('"job dead"')) return null;
  let entry: { message?: unknown; jobId?: unknown; name?: unknown; reasons?: unknown };
  try {
    entry = JSON.parse(line) as typeof entry;
  } catch {
    return null;
  }
  if (entry.message !== "job dead" || !Array.isArray(entry.reasons)) return null;
  const reasons = entry.reasons.map(String);
  const last = reasons.at(-1)?.split("\n")[0];
  return `job ${String(entry.jobId)} (${String(entry.name)}) dead after ${countEndings(reasons)}${last ? `; last: ${last}` : ""}`;
}
