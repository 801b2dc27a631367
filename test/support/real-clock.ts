import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/**
 * Which test files sleep on the real clock, and why (issue 23).
 *
 * A file sleeps on the real clock when the test's own code waits on a system
 * timer: a `setTimeout` with a delay other than a literal 0 (a `sleep`/`delay`
 * helper, `await new Promise((r) => setTimeout(r, ms))`, a handler that
 * "works" for some milliseconds, a poll loop's pause, a race against a
 * timeout), a `setInterval`, `node:timers/promises`, `AbortSignal.timeout`,
 * `vi.waitFor`/`vi.waitUntil`, or a call to a test/support helper that does
 * one of these (`until` in support/stack.ts polls every 100 ms: a "wait until
 * a condition, with a timeout" that polls the database is a real-clock wait).
 *
 * Not counted: the injected clocks (support/clock.ts: a `ManualClock` moves
 * only when the test advances it; a `FastForwardClock`'s timers are brought
 * forward by the test), `setTimeout(fn, 0)` (a turn of the event loop, not a
 * time), waits on an event (a notification, a child's exit, a page's DOM in
 * Playwright's `locator.waitFor`), and a loop that asks Postgres for a state
 * with no timer between the asks (each ask a round trip: it waits for the
 * state, not for a time). Also not counted, a known limit of a reading of the
 * test's own text: timers inside the code under test (a runner's `idleMs` or
 * `pollMs` on the system clock), which end on a condition, not a time.
 */

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The real-clock waits written in `text`: one reason per kind, with its first line. */
export function timerWaits(text: string, file = "x.ts"): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found = new Map<string, number>();
  const note = (what: string, node: ts.Node) => {
    if (!found.has(what)) found.set(what, source.getLineAndCharacterOfPosition(node.getStart()).line + 1);
  };
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node)) {
      const callee = node.expression.getText(source);
      const delay = node.arguments[1];
      const zero = delay && ts.isNumericLiteral(delay) && Number(delay.text) === 0;
      if (callee === "setTimeout" && !zero) note("setTimeout", node);
      if (callee === "setInterval") note("setInterval", node);
      if (callee === "AbortSignal.timeout") note("AbortSignal.timeout", node);
      if (callee === "vi.waitFor" || callee === "vi.waitUntil") note(callee, node);
    }
    if (ts.isImportDeclaration(node) && /^(node:)?timers\/promises$/.test((node.moduleSpecifier as ts.StringLiteral).text)) note("timers/promises", node);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return [...found].map(([what, line]) => `${what} (line ${line})`);
}

/** The exported functions of each test/support module that wait on a timer (directly, or through another in the same module). */
function sleepingHelpers(): Map<string, Map<string, string>> {
  const helpers = new Map<string, Map<string, string>>();
  for (const name of readdirSync(join(root, "test", "support")).filter((f) => f.endsWith(".ts") && f !== "clock.ts" && f !== "real-clock.ts")) {
    const text = readFileSync(join(root, "test", "support", name), "utf8");
    const source = ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true);
    const bodies = new Map<string, string>();
    for (const s of source.statements) {
      if (ts.isFunctionDeclaration(s) && s.name) bodies.set(s.name.text, s.getText(source));
      if (ts.isClassDeclaration(s) && s.name) bodies.set(s.name.text, s.getText(source));
      if (ts.isVariableStatement(s)) for (const d of s.declarationList.declarations) bodies.set(d.name.getText(source), d.getText(source));
    }
    const sleeps = new Map<string, string>();
    for (const [fn, body] of bodies) if (timerWaits(body).length > 0) sleeps.set(fn, timerWaits(body)[0]!.replace(/ \(line \d+\)$/, ""));
    for (let grew = true; grew; ) {
      grew = false;
      for (const [fn, body] of bodies) {
        const via = [...sleeps.keys()].find((s) => s !== fn && new RegExp(`\\b${s}\\b`).test(body));
        if (!sleeps.has(fn) && via) (sleeps.set(fn, `through ${via}`), (grew = true));
      }
    }
    const exported = new Set([...text.matchAll(/^export\s+(?:async\s+)?(?:function|const|class)\s+(\w+)/gm)].map((m) => m[1]!));
    helpers.set(name, new Map([...sleeps].filter(([fn]) => exported.has(fn))));
  }
  return helpers;
}

/** Every test file that sleeps on the real clock, with why. */
export function realClockSleepers(): Map<string, string[]> {
  const helpers = sleepingHelpers();
  const sleepers = new Map<string, string[]>();
  for (const file of readdirSync(join(root, "test")).filter((f) => f.endsWith(".test.ts")).sort()) {
    const text = readFileSync(join(root, "test", file), "utf8");
    const why = timerWaits(text, file);
    for (const m of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*["']\.\/support\/([\w-]+\.ts)["']/g)) {
      for (const name of m[1]!.split(",").map((n) => n.replace(/^\s*type\s+/, "").trim().split(/\s+as\s+/).pop()!).filter(Boolean)) {
        const how = helpers.get(m[2]!)?.get(name);
        if (how && new RegExp(`\\b${name}\\b`).test(text.slice(m.index! + m[0].length))) why.push(`${name}() from support/${m[2]} (${how})`);
      }
    }
    if (why.length > 0) sleepers.set(file, why);
  }
  return sleepers;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const sleepers = realClockSleepers();
  for (const [file, why] of sleepers) console.log(`${file}: ${why.join("; ")}`);
  console.log(`${sleepers.size} test files sleep on the real clock`);
}
