/**
 * The four scenarios of the published background-job benchmark, plus the
 * idle-queue latency and the Lambda cost, through the local Lambda runtime.
 *
 *   npx tsx bench/scenarios/run.ts [--quick] [--only workflow,mix,tenants,tenants-unfair,oom,latency,cost] [--json FILE] [--md FILE]
 *
 * DATABASE_URL or BENCH_DSN (default postgres://postgres@127.0.0.1:5432/postgres);
 * each scenario gets its own fresh schema, dropped afterwards.
 */
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { COST_FULL, COST_QUICK, runCost, type CostResult } from "./cost.ts";
import { costReport } from "./cost-report.ts";
import { DEFAULT_DATABASE_URL, type Dist } from "./harness.ts";
import { LATENCY_FULL, LATENCY_QUICK, runLatency, type LatencyResult, type LatencyRun } from "./latency.ts";
import { MIX_FULL, MIX_QUICK, runMix, type MixResult } from "./mix.ts";
import { OOM_FULL, OOM_QUICK, runOom, type OomResult } from "./oom.ts";
import { PRODUCTION, QUICK, type ScenarioEnv } from "./profile.ts";
import { runTenants, TENANTS_FULL, TENANTS_QUICK, type TenantsResult } from "./tenants.ts";
import { runWorkflow, WORKFLOW_FULL, WORKFLOW_QUICK, type WorkflowResult } from "./workflow.ts";

export const SCENARIOS = ["workflow", "mix", "tenants", "tenants-unfair", "oom", "latency", "cost"] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export interface ScenarioResults {
  meta: { quick: boolean; profile: string; startedAt: string; finishedAt: string; node: string; host: string };
  workflow?: WorkflowResult;
  mix?: MixResult;
  tenants?: TenantsResult;
  /** The same, with runners that ignore groups: what the fair claim is measured against. */
  "tenants-unfair"?: TenantsResult;
  oom?: OomResult;
  latency?: LatencyResult;
  cost?: CostResult;
  /** Scenarios that threw, with the error. */
  errors: Record<string, string>;
}

export interface RunScenariosOptions {
  quick?: boolean;
  databaseUrl?: string;
  /** Default: all. */
  only?: readonly ScenarioName[];
  wsRelay?: string;
  log?: (message: string) => void;
}

export async function runScenarios(options: RunScenariosOptions = {}): Promise<ScenarioResults> {
  const quick = options.quick ?? false;
  const profile = quick ? QUICK : PRODUCTION;
  const env: ScenarioEnv = {
    databaseUrl: options.databaseUrl ?? process.env.DATABASE_URL ?? process.env.BENCH_DSN ?? DEFAULT_DATABASE_URL,
    wsRelay: options.wsRelay,
    log: options.log,
  };
  const log = options.log ?? (() => {});
  const results: ScenarioResults = {
    meta: {
      quick, profile: profile.name, startedAt: new Date().toISOString(), finishedAt: "",
      node: process.version, host: `${process.platform} ${process.arch}`,
    },
    errors: {},
  };
  const runners: Record<ScenarioName, () => Promise<unknown>> = {
    workflow: () => runWorkflow(env, profile, quick ? WORKFLOW_QUICK : WORKFLOW_FULL),
    mix: () => runMix(env, profile, quick ? MIX_QUICK : MIX_FULL),
    tenants: () => runTenants(env, profile, quick ? TENANTS_QUICK : TENANTS_FULL),
    "tenants-unfair": () => runTenants(env, profile, { ...(quick ? TENANTS_QUICK : TENANTS_FULL), fair: false }),
    oom: () => runOom(env, profile, quick ? OOM_QUICK : OOM_FULL),
    latency: () => runLatency(env, profile, quick ? LATENCY_QUICK : LATENCY_FULL),
    cost: () => runCost(env, profile, quick ? COST_QUICK : COST_FULL),
  };
  for (const name of options.only ?? SCENARIOS) {
    const started = Date.now();
    log(`scenario ${name}: start (${profile.name})`);
    try {
      (results as unknown as Record<string, unknown>)[name] = await runners[name]();
      log(`scenario ${name}: done in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    } catch (err) {
      results.errors[name] = err instanceof Error ? (err.stack ?? err.message) : String(err);
      log(`scenario ${name}: FAILED ${results.errors[name]}`);
    }
  }
  results.meta.finishedAt = new Date().toISOString();
  return results;
}

// ---------------------------------------------------------------------------
// Markdown

const s3 = (x: number | null | undefined) => (x == null ? "–" : x.toFixed(3));
const distCells = (d: Dist) => `${s3(d.p50)} | ${s3(d.p95)} | ${s3(d.max)}`;
const ok = (pass: boolean) => (pass ? "yes" : "**NO**");

function table(head: string[], rows: (string | number)[][]): string {
  return [`| ${head.join(" | ")} |`, `| ${head.map(() => "---").join(" | ")} |`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
}

export function scenarioReport(results: ScenarioResults): string {
  const out: string[] = [];
  const m = results.meta;
  out.push(`## Scenarios (${m.quick ? "quick: shortened clocks and counts" : "full: the published durations, production config"})`);
  out.push(
    `Run ${m.startedAt} – ${m.finishedAt}, Node ${m.node}, ${m.host}. Scheduler, runners and rescuer ran as real processes in the local ` +
      `Lambda runtime (${m.profile} profile: ${m.quick ? "scheduler cron 10 s, rescuer 2 s, 3 s leases" : "scheduler and rescuer crons every minute, 30 s leases"}), ` +
      "the scheduler woken after every enqueue as the API does. Times are seconds on the database clock (jobs.created_at, handler start/finish rows " +
      "stamped with clock_timestamp()); local cold starts are process spawns and are slower than Lambda's when many start at once on a small host.",
  );

  const w = results.workflow;
  if (w) {
    out.push(`### workflow: ${w.params.runs} runs × ${w.params.steps} sequential steps, started at once`);
    out.push(table(
      ["hop p50", "hop p95", "hop max", "enqueue→start p50", "steps/s", "runs complete", "every step exactly once", "duplicated steps"],
      [[s3(w.hop.p50), s3(w.hop.p95), s3(w.hop.max), s3(w.enqueueToStart.p50), w.stepsPerSecond, `${w.completedRuns}/${w.params.runs}`, ok(w.exactRuns === w.params.runs), w.duplicatedSteps]],
    ));
    out.push("Hop = next step started − previous step finished (the step records its finish, then enqueues the next with ctx.enqueue). Published good engines: 0.01–0.03 s hop p50.");
  }

  const x = results.mix;
  if (x) {
    out.push(`### mix: ${x.params.durationMs / 1000} s of waiting jobs (every ${x.params.waitEveryMs} ms, ${x.params.waitMinMs / 1000}–${x.params.waitMaxMs / 1000} s each) beside CPU jobs (every ${x.params.cpuEveryMs / 1000} s, ${x.params.cpuMs / 1000} s of CPU, one-slot runner-cpu) and a sweep every ${x.params.sweepEveryMs / 1000} s`);
    out.push(table(
      ["jobs", "n", "wait p50", "wait p95", "wait max"],
      [
        ["waiting, all", x.waiting.wait.n, distCells(x.waiting.wait)],
        [`waiting, after the first ${x.params.warmupMs / 1000} s`, x.waiting.waitAfterWarmup.n, distCells(x.waiting.waitAfterWarmup)],
        ["waiting, started while a CPU job ran", x.waitBesideCpu.n, distCells(x.waitBesideCpu)],
        ["waiting, started while no CPU job ran", x.waitNoCpu.n, distCells(x.waitNoCpu)],
        ["cpu", x.cpu.wait.n, distCells(x.cpu.wait)],
      ],
    ));
    out.push(
      `Waiting jobs ran in ${x.waitingRanIn.join(", ")}; CPU jobs in ${x.cpuRanIn.join(", ")}. Sweep lateness (started − run_at): ` +
        `${x.sweeps.map((sw) => (sw.latenessS == null ? sw.status : s3(sw.latenessS))).join(", ")}; latest ${s3(x.sweepLatestStartS)} s. ` +
        `Not succeeded: ${x.lost}; started twice: ${x.duplicated}. Published: best 0.00/0.01 s wait p50/p95, plain Postgres queue 0.01/0.57 s.`,
    );
  }

  const variants = ([["fair", results.tenants], ["ignores groups", results["tenants-unfair"]]] as const).filter(([, v]) => v);
  const t = variants[0]?.[1];
  if (t) {
    out.push(`### tenants: ${t.params.bigJobs} jobs at once from one group, one every ${t.params.smallEveryMs / 1000} s from another for ${t.params.durationMs / 1000} s; every runner killed at ${t.params.killAtMs / 1000} s, scheduling paused ${t.params.pauseMs / 1000} s`);
    out.push(table(
      ["claim", "lost", "duplicated", "held by killed runners (started)", "small group wait p50 / p95", "big group wait p95", "longest stall", "kill → next completion", "first runner reserved after kill", "wall"],
      variants.map(([claim, v]) => [
        claim, `${v!.lost} ${v!.lost === 0 ? "" : "**NOT 0**"}`, `${v!.duplicated} ${(v!.duplicatedBeyondKilled ?? []).length === 0 ? "" : `**${v!.duplicatedBeyondKilled.length} NOT HELD BY A KILLED RUNNER**`}`,
        `${v!.heldByKilled} (${v!.heldAndStarted}) in ${v!.killedRunners} runners`, `${s3(v!.smallWait.p50)} / ${s3(v!.smallWait.p95)}`, s3(v!.bigWait.p95),
        `${v!.longestStallS} s from +${v!.stallFromS} s`, `${v!.killToNextCompletionS ?? "–"} s`, `+${v!.firstReserveAfterKillS ?? "–"} s`, `${v!.wallSeconds} s`,
      ]),
    ));
    out.push("Duplicated = jobs whose handler started more than once; every start but a job's last must have been in a killed runner (then charged lease_expired, or given back when it died before recording the start).");
  }

  const o = results.oom;
  if (o) {
    out.push(`### oom: a job that grows its memory until its runner dies, max attempts 3, beside ${o.params.ordinaryJobs} ordinary jobs, ${o.params.durationMs / 1000} s`);
    out.push(table(
      ["starts (must be 3)", "final state", "dead after", "attempt rows", "ordinary succeeded", "ordinary caught in a death", "ordinary started twice", "ordinary wait p50 / p95", "runner deaths (OOM)"],
      [[
        `${o.hog.starts} ${o.hog.starts === 3 ? "" : "**NOT 3**"}`, o.hog.status, `${o.hog.deadAfterS ?? "–"} s`,
        o.hog.attempts.map((a) => `${a.attempt}: ${a.outcome}`).join("; "), `${o.ordinary.succeeded}/${o.ordinary.jobs}`,
        o.ordinary.caughtInDeaths, o.ordinary.duplicated, `${s3(o.ordinary.wait.p50)} / ${s3(o.ordinary.wait.p95)}`,
        `${o.runnerDeaths.killed} (${o.runnerDeaths.outOfMemory})`,
      ]],
    ));
    if (o.hog.attempts[0]?.error) out.push(`Reason on record (attempt 1): \`${o.hog.attempts[0].error}\``);
  }

  const l = results.latency;
  if (l) {
    out.push(`### idle queue → enqueue → job started (${l.params.trials} trials each, wake-up path, no cron)`);
    const row = (name: string, r: LatencyRun) => [
      name, r.p50Ms ?? "–", r.p95Ms ?? "–", r.parts.wakeAccepted ?? "–", r.parts.schedulerPassDone ?? "–", r.parts.runnerStarted ?? "–",
      r.parts.firstClaim ?? "–", r.parts.started ?? "–", r.p50Ms != null && r.p50Ms <= 250 ? "yes" : "**no**",
    ];
    out.push(table(
      ["runner", "p50 ms", "p95 ms", "wake accepted", "scheduler pass done", "runner started", "first claim", "started", "p50 ≤ 250 ms"],
      [row("warm", l.warm), row("cold", l.cold)],
    ));
    out.push("Parts are p50 ms after the enqueue (jobs.created_at): wake invoke accepted → scheduler reserved a runner → runner invocation registered (after init and its first connection) → claim → handler start.");
  }

  if (results.cost) out.push(...costReport(results.cost, l?.warm, x));

  for (const [name, err] of Object.entries(results.errors)) out.push(`**${name} failed:** \`${err.split("\n")[0]}\``);
  return out.join("\n\n") + "\n";
}


// ---------------------------------------------------------------------------
// CLI

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { quick: { type: "boolean", default: false }, only: { type: "string" }, json: { type: "string" }, md: { type: "string" } },
  });
  const only = values.only?.split(",").map((x) => x.trim()) as ScenarioName[] | undefined;
  for (const name of only ?? []) if (!SCENARIOS.includes(name)) throw new Error(`unknown scenario ${name}; one of ${SCENARIOS.join(", ")}`);
  const log = (message: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${message}`);
  const results = await runScenarios({ quick: values.quick, only, log });
  const md = scenarioReport(results);
  if (values.json) writeFileSync(values.json, JSON.stringify(results, null, 2));
  if (values.md) writeFileSync(values.md, md);
  process.stdout.write(md);
  process.exitCode = Object.keys(results.errors).length ? 1 : 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await main();
}
