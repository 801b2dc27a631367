/**
 * The checks on the synthesized stack catch what they claim to: each
 * mutation below removes one thing from infra (a permission, an environment
 * variable, an alarm dimension) in a copy of this app, synthesizes the copy
 * with SST's component code, and the named check must fail, naming it. The
 * same checks pass on the unchanged app (test/synth.test.ts).
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { CHECKS } from "../dev/synth/checks.ts";
import { Graph } from "../dev/synth/graph.ts";
import { synthesize } from "../dev/synth/synth.ts";
import { ensurePlatform } from "./support/platform.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
/** What the app's sst.config.ts reaches: its infra, the core, the functions, its config, jobs and migrations. */
const APP_FILES = ["sst.config.ts", "package.json", "tsconfig.json", "leasehold.config.ts", "infra", "shared", "functions", "jobs", "migrations", "dev"];

interface Mutation {
  what: string;
  file: string;
  from: string;
  to: string;
  check: string;
  problem: RegExp;
}

const MUTATIONS: Mutation[] = [
  {
    what: "the runner's permission to invoke the scheduler removed",
    file: "infra/functions.ts",
    from: `        permissions: [{ actions: ["lambda:InvokeFunction"], resources: [schedulerArnByName] }],\n`,
    to: "",
    check: "each function's role allows exactly what it calls",
    problem: /^Runner: may not lambda:InvokeFunction on arn:aws:lambda:.*:function:leasehold-mutant-Scheduler$/,
  },
  {
    what: "the scheduler's LEASEHOLD_RESCUER_FUNCTION removed",
    file: "infra/functions.ts",
    from: "      rescuerFunction: rescuer.name,\n",
    to: "",
    check: "every variable a function reads is set, by the contract (shared/settings/environment.ts)",
    problem: /^Scheduler: LEASEHOLD_RESCUER_FUNCTION is not set$/,
  },
  {
    what: "the function dimension of the InvokeFailures alarms removed",
    file: "infra/alarm-specs.ts",
    from: "    dimensions: metricDimensions(Metric.InvokeFailures, fn),\n",
    to: "    dimensions: metricDimensions(Metric.WatchLost),\n",
    check: "the DeadJobs, UnservedJobs, InvokeFailures-<fn> and WatchLost alarms watch the metrics as published",
    problem: /^InvokeFailures-scheduler: watches Leasehold\/InvokeFailures \{"service":"leasehold"\}, published as .*"function":"scheduler"/,
  },
];

describe("a mutation of infra makes the named check fail", () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  for (const m of MUTATIONS) {
    it(`${m.what}: "${m.check}" fails`, async () => {
      ensurePlatform();
      const check = CHECKS.find((c) => c.name === m.check);
      expect(check, m.check).toBeDefined();
      const app = mkdtempSync(join(tmpdir(), "leasehold-mutant-"));
      dirs.push(app);
      for (const entry of APP_FILES) cpSync(join(root, entry), join(app, entry), { recursive: true });
      symlinkSync(join(root, "node_modules"), join(app, "node_modules"));
      symlinkSync(join(root, ".sst"), join(app, ".sst"));
      const source = readFileSync(join(app, m.file), "utf8");
      expect(source, `${m.file} still has what the mutation removes`).toContain(m.from);
      writeFileSync(join(app, m.file), source.replace(m.from, m.to));
      // The app's name from its config: "leasehold"; the stage says which stack this is.
      const graph = new Graph(await synthesize({ root: app, stage: "mutant" }));
      const problems = check!.run(graph);
      expect(problems.some((p) => m.problem.test(p)), problems.join("\n")).toBe(true);
    }, 600_000);
  }
});
