import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { budgetMarkdown } from "./budget.ts";
import { DEFAULT_DSN } from "./db.ts";
import { runBench, type BenchResults } from "./driver.ts";
import { LIB_IDS, type LibId } from "./lib.ts";
import { defaultPlan, FULL_SIZES, QUICK_SIZES } from "./plan.ts";
import { renderReport } from "./report.ts";
import { runScenarios, scenarioReport, type ScenarioResults } from "./scenarios/run.ts";

/**
 * npm run bench [-- --quick] [--runs N] [--only phase,...] [--libs leasehold,...]
 *                [--pool N] [--prefetch N] [--relay-delay MS]
 *                [--quiet-busy 0.15] [--report-only bench/results/<file>.json]
 *
 *                [--no-scenarios]
 *
 * Full: 5 interleaved runs (what issue 24's targets are read from: on a
 * noisy host, 3 leave the median one run from either end), then the
 * published scenarios through the local Lambda runtime
 * (about 10 minutes more); writes bench/results/<date>.json and BENCHMARKS.md.
 * Quick: 1 run, smaller counts, no 1M backlog; writes bench/results/<date>-quick.{json,md}.
 */

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const RESULTS = fileURLToPath(new URL("./results/", import.meta.url));

const { values: a } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    runs: { type: "string" },
    only: { type: "string" },
    libs: { type: "string" },
    pool: { type: "string" },
    "prefetch": { type: "string" },
    "relay-delay": { type: "string" },
    "report-only": { type: "string" },
    report: { type: "string" },
    "quiet-busy": { type: "string" },
    "no-scenarios": { type: "boolean", default: false },
  },
});

const log = (m: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${m}`);

type Results = BenchResults & { scenarios?: ScenarioResults };

function writeReport(results: Results, jsonPath: string): void {
  const stem = jsonPath.replace(/^.*\//, "").replace(/\.json$/, "");
  const reportPath = a.report ? `${ROOT}${a.report}` : results.meta.quick || stem.endsWith("-partial") ? `${RESULTS}${stem}.md` : `${ROOT}BENCHMARKS.md`;
  const analysisPath = fileURLToPath(new URL("./analysis.md", import.meta.url));
  const reportDir = reportPath.replace(/[^/]*$/, "");
  const report = renderReport(results, {
    resultsFile: relative(reportDir, jsonPath),
    chartDir: relative(reportDir, RESULTS) || ".",
    chartPrefix: stem,
    analysis: existsSync(analysisPath) ? readFileSync(analysisPath, "utf8") : undefined,
  });
  for (const [file, svg] of Object.entries(report.charts)) writeFileSync(`${RESULTS}${file}`, svg);
  const scenarios = results.scenarios ? `\n${scenarioReport(results.scenarios)}\n` : "";
  writeFileSync(reportPath, report.markdown + scenarios);
  log(`wrote ${relative(ROOT, reportPath)} and ${Object.keys(report.charts).length} charts`);
}

mkdirSync(RESULTS, { recursive: true });
if (a["report-only"]) {
  const path = `${ROOT}${a["report-only"]}`;
  writeReport(JSON.parse(readFileSync(path, "utf8")) as Results, path);
} else {
  const quick = a.quick!;
  let plan = defaultPlan(quick);
  if (a.only) {
    const only = a.only.split(",");
    plan = plan.filter((p) => only.includes(p.name));
    if (plan.length === 0) throw new Error(`--only matched no phase; phases: ${defaultPlan(false).map((p) => p.name).join(", ")}`);
  }
  const libs = a.libs ? (a.libs.split(",") as LibId[]) : [...LIB_IDS];
  for (const l of libs) if (!LIB_IDS.includes(l)) throw new Error(`unknown library ${l}`);
  const date = new Date().toISOString().slice(0, 10);
  // A partial run (--only, --libs, --prefetch, --pool) must not overwrite the day's full results.
  const partial = a.only || a.libs || a.prefetch || a.pool ? "-partial" : "";
  const jsonPath = `${RESULTS}${date}${quick ? "-quick" : ""}${partial}.json`;
  const save = (r: Results) => writeFileSync(jsonPath, `${JSON.stringify(r, null, 2)}\n`);
  const results: Results = await runBench({
    adminDsn: process.env.BENCH_DSN ?? DEFAULT_DSN,
    plan,
    runs: a.runs ? Number(a.runs) : quick ? 1 : 5,
    sizes: quick ? QUICK_SIZES : FULL_SIZES,
    libs,
    quick,
    poolSize: a.pool ? Number(a.pool) : undefined,
    prefetch: a["prefetch"] ? Number(a["prefetch"]) : undefined,
    relayDelayMs: a["relay-delay"] ? Number(a["relay-delay"]) : undefined,
    quietBusy: a["quiet-busy"] ? Number(a["quiet-busy"]) : 0.15,
    log,
    onProgress: save,
  });
  save(results);
  if (!partial && !a["no-scenarios"]) {
    log("scenarios through the local Lambda runtime ...");
    results.scenarios = await runScenarios({ quick, databaseUrl: process.env.BENCH_DSN ?? DEFAULT_DSN, log });
    save(results);
  }
  log(`wrote ${relative(ROOT, jsonPath)}`);
  if (results.phases.budget) console.log(budgetMarkdown(results.phases.budget));
  writeReport(results, jsonPath);
  process.exit(0);
}
