import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { realClockSleepers, timerWaits } from "./support/real-clock.ts";

/**
 * The shape of the core, read from its source: no import cycle in shared/
 * (type imports count: a cycle of types still ties the modules together),
 * each rule of a job's life written in one place, and no file or function
 * too long to read.
 */

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

function tsFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** Every relative import and re-export of each file under `dir`, static or dynamic, as paths from the repo root. */
export function importGraph(dir: string): Map<string, string[]> {
  const files = tsFiles(dir);
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const src = readFileSync(join(root, file), "utf8");
    const specifiers = [
      ...src.matchAll(/\b(?:import|export)\b[^;]*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']/gs),
      ...src.matchAll(/\bimport\s*\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g),
      ...src.matchAll(/^\s*import\s*["'](\.{1,2}\/[^"']+)["']/gm),
    ].map((m) => m[1]!);
    const deps = specifiers.map((s) => normalize(join(dirname(file), s)).replace(/\.js$/, ".ts")).filter((d) => known.has(d));
    graph.set(file, [...new Set(deps)]);
  }
  return graph;
}

/** The strongly connected components with more than one module (or a module importing itself): each is a cycle. */
export function importCycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

describe("the import graph of shared/", () => {
  it("finds a cycle when there is one (the check itself)", () => {
    const graph = new Map([
      ["a.ts", ["b.ts"]],
      ["b.ts", ["c.ts"]],
      ["c.ts", ["a.ts"]],
      ["d.ts", ["a.ts"]],
    ]);
    expect(importCycles(graph)).toEqual([["a.ts", "b.ts", "c.ts"]]);
    expect(importCycles(new Map([["a.ts", ["b.ts"]], ["b.ts", []]]))).toEqual([]);
  });

  it("reads type imports, re-exports and dynamic imports as edges", () => {
    const graph = importGraph("shared");
    expect(graph.get(join("shared", "jobs", "validate.ts"))).toContain(join("shared", "jobs", "job-types.ts"));
    expect(graph.get(join("shared", "index.ts"))).toContain(join("shared", "jobs", "job.ts"));
    expect(graph.size).toBeGreaterThan(30);
  });

  it("has no import cycle", () => {
    const cycles = importCycles(importGraph("shared")).map((c) => c.map((f) => relative("shared", f)).join(" <-> "));
    expect(cycles).toEqual([]);
  });
});

/** The code a rule could be written in: everything but tests and the migrations already applied. */
const SOURCE_DIRS = ["shared", "functions", "cli", "dev", "infra", "bench", "scripts", "test/fixtures", "test/support"];
const sources = SOURCE_DIRS.flatMap((d) => tsFiles(d).filter((f) => !f.includes("node_modules") && !f.includes(join("bench", "results"))));

/** The files whose text matches `pattern`, as paths from the repo root. */
function filesWriting(pattern: RegExp): string[] {
  return sources.filter((f) => pattern.test(readFileSync(join(root, f), "utf8"))).sort();
}

/**
 * Each rule, the text that writes it (in any language), and the one file
 * that may. Break a rule by writing it again anywhere and its line fails.
 */
const RULES: { rule: string; writes: RegExp; owner: string }[] = [
  // An exponential in a variable (2 ** 31 and 2 ** 20 are sizes, not backoffs).
  { rule: "the backoff formula", writes: /\b2\s*\*\*\s*(?![\s\d])|Math\.pow\(\s*2\b/, owner: "shared/lifecycle/backoff.ts" },
  { rule: "attempts charged (an owed attempt counted)", writes: /owes_attempt::integer|owesAttempt\s*\?\s*1/, owner: "shared/lifecycle/attempt-rules.ts" },
  // Any comparison with the maximum: the last attempt, and the retry-or-dead rule built on it.
  {
    rule: "the last attempt, and retry or dead",
    writes: /(>=|<=|<|>)\s*[$({]*\s*[A-Za-z_.]*max_?attempts\b|\bmax_?attempts[})]*\s*(>=|<=|<|>)(?!=)/i,
    owner: "shared/lifecycle/attempt-rules.ts",
  },
  { rule: "retry or dead (its definitions)", writes: /\b(const|function)\s+(endsDeadSql|retryOrDead)\b/, owner: "shared/lifecycle/attempt-rules.ts" },
  { rule: "the schema-name pattern", writes: /\[a-z_\]\[a-z0-9_\]/, owner: "shared/db/db.ts" },
];

describe("each rule of a job's life is written once", () => {
  it.each(RULES)("$rule: only in $owner", ({ rule, writes, owner }) => {
    expect(filesWriting(writes)).toEqual([owner]);
  });

  it("every state change of a job is a statement in shared/lifecycle/ (the bench's before-and-after copies and fixtures aside)", () => {
    // SQL that sets a job's status, or brings a job into being.
    const writesStatus = /\bset\s+status\s*=|\binsert\s+into\s+leasehold\.jobs\b|`\s*status\s*=\s*'/i;
    expect(writesStatus.test("update leasehold.jobs set status = 'dead'")).toBe(true);
    expect(writesStatus.test("select 1 from leasehold.jobs where status = 'dead'")).toBe(false);
    expect(filesWriting(writesStatus).filter((f) => !f.startsWith("bench"))).toEqual([
      "shared/lifecycle/claim-sql.ts", // queued -> running
      "shared/lifecycle/enqueue-sql.ts", // (none) -> queued, and (none) -> running for the insert that is a claim
      "shared/lifecycle/manual.ts", // queued -> cancelled, dead -> queued
      "shared/lifecycle/rescue.ts", // running, lease expired -> queued or dead
      "shared/lifecycle/settle-sql.ts", // running -> succeeded, queued (retry, release, sleep) or dead
    ].map((f) => join(...f.split("/"))));
  });

  it("the attempt rules are built from the shared fragments where they run", () => {
    const uses = (file: string, name: string) => readFileSync(join(root, file), "utf8").includes(`${name}(`);
    expect(uses("shared/lifecycle/claim-sql.ts", "startsFirstSql")).toBe(true);
    expect(uses("shared/lifecycle/enqueue-sql.ts", "startsFirstSql")).toBe(true);
    expect(uses("shared/lifecycle/settle-sql.ts", "endsDeadSql")).toBe(true);
    expect(uses("shared/lifecycle/settle-sql.ts", "chargedAttemptsSql")).toBe(true);
    expect(uses("shared/lifecycle/rescue.ts", "retryOrDead")).toBe(true);
    expect(uses("shared/lifecycle/rescue.ts", "chargedAttempts")).toBe(true);
  });
});

/** Every function (declaration, method, arrow, expression) longer than `max` lines in these files, as "file:line name (n lines)". */
function longFunctions(files: string[], max: number): string[] {
  const long: string[] = [];
  for (const file of files) {
    const source = ts.createSourceFile(file, readFileSync(join(root, file), "utf8"), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node) => {
      if (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isArrowFunction(node) || ts.isFunctionExpression(node)) {
        const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
        const lines = source.getLineAndCharacterOfPosition(node.getEnd()).line - first + 1;
        const parent = node.parent;
        const name = node.name?.getText() ?? (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) ? parent.name.getText() : "(anonymous)");
        if (lines > max) long.push(`${file}:${first + 1} ${name} (${lines} lines)`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return long;
}

describe("the core's files and functions stay readable", () => {
  const code = ["shared", "functions", "bench", "cli", "dev", "infra"].flatMap((d) =>
    tsFiles(d).filter((f) => !f.includes("node_modules") && !f.includes(join("bench", "results"))),
  );

  it("no file over 300 lines", () => {
    const long = code.map((f) => [f, readFileSync(join(root, f), "utf8").split("\n").length - 1] as const).filter(([, n]) => n > 300);
    expect(long).toEqual([]);
  });

  it("no function over 80 lines in shared/ or functions/", () => {
    const files = code.filter((f) => f.startsWith("shared") || f.startsWith("functions"));
    expect(longFunctions(files, 80)).toEqual([]);
  });
});

/**
 * Tests wait on an injected clock (support/clock.ts) or move the stored times
 * (a lease, a run_at) instead of sleeping: a sleep is a threshold a loaded
 * machine can miss (issue 23). What counts as sleeping on the real clock is
 * written, with what does not, in support/real-clock.ts (`npx tsx
 * test/support/real-clock.ts` lists the files and why). A file that starts
 * sleeping fails here unless it is listed below, and a listed file that no
 * longer sleeps must come off the list, so the ceiling only comes down.
 */
const MUST_USE_REAL_TIME: Record<string, string> = {
  // Real processes, runtimes and network faults: their time is the thing tested.
  "dev-stack.test.ts": "the dev stack's real processes: its start-up, restarts and shutdown signals",
  "first-hour.test.ts": "the packed tarball installed and run as a new user would, real processes",
  "package.test.ts": "npm pack and an outside app's processes, waited for as they start",
  "lambda-runtime.test.ts": "the local Lambda runtime itself: its processes, timeouts, billing and kills",
  "functions.test.ts": "the functions run for real in the local Lambda runtime (OOM kills, late finishes)",
  "deaths.test.ts": "every way a job dies, through the functions run for real",
  "deploy-skew.test.ts": "two deploys' functions run for real, side by side",
  "recurring.test.ts": "EventBridge ticks delivered to the functions run for real",
  "sleep-idle.test.ts": "the local Scheduler's AWS wake-up timing, and idle backends read from Postgres' statistics",
  "wake.test.ts": "start lateness measured on the functions run for real (the claim is a time)",
  "invoke-faults.test.ts": "Lambda Invokes failing for a span of real time, and the scheduler's backoff through it",
  "edge-invariants.test.ts": "the edge runner in workerd, whose timers are its own",
  "faults.test.ts": "worker processes SIGKILLed, Postgres restarted, connections cut or silent (the drivers' real timeouts)",
  "fault-proxy.test.ts": "the TCP fault proxy itself: cuts and stalls of real connections",
  "lease-faults.test.ts": "1 s leases through a proxy that cuts and silences real connections (the drivers' real timeouts), and the per-write deadline on a real connection gone silent",
  "limits-faults.test.ts": "worker processes SIGKILLed at random moments",
  "step-deaths.test.ts": "worker processes SIGKILLed at random moments mid-step",
  "lent-connections.test.ts": "a real connection's answer and its loss held in the TCP fault proxy and delivered in one read",
};

/** Files that still sleep but need not (issue 23's remainder): none left; a file that starts sleeping goes above, with its reason, or not at all. */
const NOT_YET_CONVERTED: Record<string, string> = {};

describe("tests wait on an injected clock or moved stored times, not on the real clock", () => {
  it("reads a sleep as a sleep, and an injected or zero-delay timer as none (the check itself)", () => {
    expect(timerWaits("const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));")).toEqual(["setTimeout (line 1)"]);
    expect(timerWaits("await new Promise((r) =>\n  setTimeout(r, 50));")).toEqual(["setTimeout (line 2)"]);
    expect(timerWaits('import { setTimeout as wait } from "node:timers/promises";')).toEqual(["timers/promises (line 1)"]);
    expect(timerWaits("await vi.waitFor(() => done);\nsetInterval(poll, 10);")).toEqual(["vi.waitFor (line 1)", "setInterval (line 2)"]);
    expect(timerWaits("setTimeout(fn, 0); clock.after(5_000, fn); await clock.advance(100);")).toEqual([]);
  });

  it("finds the sleeps of the suite, direct and through test/support helpers", () => {
    const sleepers = realClockSleepers();
    expect(sleepers.get("faults.test.ts")).toEqual(expect.arrayContaining([expect.stringMatching(/^runFaultScenario\(\) from support\/fault-run\.ts/)]));
    expect(sleepers.get("recurring.test.ts")).toEqual([expect.stringMatching(/^until\(\) from support\/stack\.ts/)]);
    expect(sleepers.has("runner-units.test.ts")).toBe(false);
  });

  it("only the files listed sleep on the real clock, and every listed file still does", () => {
    const allowed = { ...MUST_USE_REAL_TIME, ...NOT_YET_CONVERTED };
    const sleepers = realClockSleepers();
    const unlisted = [...sleepers].filter(([file]) => !(file in allowed)).map(([file, why]) => `${file}: ${why.join("; ")}`);
    expect(unlisted).toEqual([]);
    expect(Object.keys(allowed).filter((file) => !sleepers.has(file))).toEqual([]);
    expect(sleepers.size).toBeLessThanOrEqual(Object.keys(allowed).length);
  });
});
