/**
 * Checks on a synthesized stack (dev/synth/synth.ts), each named: what
 * `sst deploy` would create, read for what would fail or stay silent after
 * the first deploy. Each returns its problems (none: it holds). Used by
 * test/synth.test.ts (one test per check) and `leasehold check`.
 */
import { DEPLOYED_ENVIRONMENT, ENV, readEnvironment, type FunctionKind } from "../../shared/settings/environment.ts";
import { parseSchedule } from "../../infra/schedule.ts";
import { alarmChecks } from "./alarm-checks.ts";
import { allows, covers, Graph, type SynthFunction } from "./graph.ts";

export type { Check } from "./graph.ts";
import type { Check } from "./graph.ts";

export const only = <T>(items: T[], what: string, problems: string[]): T | undefined => {
  if (items.length !== 1) problems.push(`expected one ${what}, found ${items.length}`);
  return items[0];
};

/** The scheduler, the wake role and the alarm topic: what the other checks point at. */
export function core(g: Graph, problems: string[]) {
  const scheduler = only(g.kind("scheduler"), "scheduler function", problems);
  const rescuer = only(g.kind("rescuer"), "rescuer function", problems);
  const wakeRole = only(g.roles().filter((r) => r.principals.includes("scheduler.amazonaws.com") && r.name.endsWith("WakeRole")), "wake role", problems);
  const topic = only(g.all("aws:sns/topic:Topic"), "SNS topic", problems);
  return { scheduler, rescuer, wakeRole, topicArn: topic ? String(topic.state.arn) : undefined };
}

/** What each Leasehold function's role must allow, and nothing more: [action, resource ARN]. */
function expectedCalls(g: Graph, fn: SynthFunction): [string, string][] {
  const { scheduler, rescuer, wakeRole } = core(g, []);
  const schedulerArn = scheduler?.arn ?? "(no scheduler)";
  const invoke = (f: SynthFunction | undefined): [string, string] => ["lambda:InvokeFunction", f?.arn ?? "(missing)"];
  const arm: [string, string][] = [["scheduler:CreateSchedule", "schedule"], ["iam:PassRole", wakeRole?.arn ?? "(no wake role)"]];
  switch (fn.kind) {
    case "runner":
      return [["lambda:InvokeFunction", schedulerArn]];
    case "scheduler":
      return [...g.kind("runner").map(invoke), invoke(rescuer), invoke(scheduler), ...arm, ["scheduler:DeleteSchedule", "schedule"]];
    case "api":
      return [invoke(scheduler), ...arm];
    default:
      return [];
  }
}

/** A schedule ARN of the wake-ups, as the scheduler and the API arm them (functions/aws.ts). */
const wakeScheduleArn = (fn: SynthFunction) => `arn:aws:scheduler:us-east-1:123456789012:schedule/default/${readEnvironment(fn.env).wakePrefix}-1764700000`;

export const CHECKS: Check[] = [
  {
    name: "no two resources share a name (a deploy stops at a duplicate)",
    run(g) {
      const seen = new Map<string, number>();
      for (const r of g.resources) seen.set(`${r.type} ${r.name}`, (seen.get(`${r.type} ${r.name}`) ?? 0) + 1);
      return [...seen].filter(([, n]) => n > 1).map(([key, n]) => `${n} resources are ${key}`);
    },
  },
  {
    name: "every function's handler is in its bundle and exports the function it names",
    run(g) {
      return g.functions().flatMap((fn) => {
        const built = g.synth.built.find((b) => b.functionID === fn.name);
        const exportName = String(fn.lambda.handler).split(".").pop()!;
        if (!built) return [`${fn.name}: never built`];
        if (built.handler !== fn.lambda.handler) return [`${fn.name}: Lambda runs ${fn.lambda.handler}, the bundle has ${built.handler}`];
        if (!built.exports.includes(exportName)) return [`${fn.name}: ${built.module} does not export ${exportName} (exports: ${built.exports.join(", ")})`];
        if (!String(fn.lambda.s3Key).startsWith(`assets/${fn.name}-code-`)) return [`${fn.name}: its code is not its own bundle (${fn.lambda.s3Key})`];
        return [];
      });
    },
  },
  {
    name: "every variable a function reads is set, by the contract (shared/settings/environment.ts)",
    run(g) {
      return g.functions().flatMap((fn) => {
        if (!fn.kind) return [];
        const missing = DEPLOYED_ENVIRONMENT[fn.kind as FunctionKind].map((k) => ENV[k]).filter((name) => !fn.env[name]);
        const problems = missing.map((name) => `${fn.name}: ${name} is not set`);
        try {
          readEnvironment(fn.env);
        } catch (err) {
          problems.push(`${fn.name}: ${(err as Error).message}`);
        }
        return problems;
      });
    },
  },
  {
    name: "the variables point at the deployed scheduler, runners, rescuer and wake role",
    run(g) {
      const problems: string[] = [];
      const { scheduler, rescuer, wakeRole } = core(g, problems);
      const runners = new Set(g.kind("runner").map((f) => f.functionName));
      for (const fn of g.functions().filter((f) => f.kind)) {
        const env = readEnvironment(fn.env);
        const expect = (what: string, value: string | undefined, wanted: string | undefined) => {
          if (value !== undefined && value !== wanted) problems.push(`${fn.name}: ${what} is ${value}, not ${wanted}`);
        };
        expect(ENV.schedulerFunction, env.schedulerFunction, scheduler?.functionName);
        expect(ENV.schedulerArn, env.schedulerArn, scheduler?.arn);
        expect(ENV.rescuerFunction, env.rescuerFunction, rescuer?.functionName);
        expect(ENV.wakeRoleArn, env.wakeRoleArn, wakeRole?.arn);
        for (const name of Object.values(env.runnerFunctions)) if (!runners.has(name)) problems.push(`${fn.name}: runs ${name}, which is no runner`);
      }
      if (scheduler && Object.keys(readEnvironment(scheduler.env).runnerFunctions).length !== runners.size) problems.push("the scheduler does not know every runner");
      return problems;
    },
  },
  {
    name: "each function's role allows exactly what it calls",
    run(g) {
      return g.functions().filter((f) => f.kind).flatMap((fn) => {
        const wanted = expectedCalls(g, fn).map(([action, arn]) => [action, arn === "schedule" ? wakeScheduleArn(fn) : arn] as const);
        const problems = wanted.filter(([action, arn]) => !allows(fn.role, action, arn)).map(([action, arn]) => `${fn.name}: may not ${action} on ${arn}`);
        for (const s of fn.role?.statements ?? []) {
          for (const action of s.Action) {
            const used = s.Resource.some((r) => wanted.some(([a, arn]) => covers(action, a) && covers(r, arn)));
            if (!used) problems.push(`${fn.name}: allowed ${action} on ${s.Resource.join(", ")}, which it never calls`);
          }
        }
        return problems;
      });
    },
  },
  {
    name: "no IAM wildcard beyond SST's own",
    run(g) {
      return g.roles().flatMap((role) =>
        role.statements.flatMap((s) => [
          ...s.Action.filter((a) => a.includes("*")).map((a) => `${role.name}: action ${a}`),
          ...s.Resource.filter((r) => r === "*" || /:(function|role|schedule\/default)\/?:?\*$/.test(r)).map((r) => `${role.name}: resource ${r} on ${s.Action.join(", ")}`),
        ]),
      );
    },
  },
  {
    name: "a failed runner invocation goes to the scheduler, never retried, and its role may invoke it",
    run(g) {
      const problems: string[] = [];
      const { scheduler } = core(g, problems);
      const configs = g.all("aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig");
      for (const runner of g.kind("runner")) {
        const mine = configs.filter((c) => c.inputs.functionName === runner.functionName);
        const config = only(mine, `invoke config of ${runner.name}`, problems);
        if (!config) continue;
        if (config.inputs.maximumRetryAttempts !== 0) problems.push(`${runner.name}: async retries ${config.inputs.maximumRetryAttempts}`);
        const destination = config.inputs.destinationConfig?.onFailure?.destination;
        if (destination !== scheduler?.arn) problems.push(`${runner.name}: on failure goes to ${destination}, not the scheduler`);
        if (!allows(runner.role, "lambda:InvokeFunction", String(destination))) problems.push(`${runner.name}: its role may not invoke its on-failure destination`);
      }
      return problems;
    },
  },
  {
    name: "every EventBridge schedule is valid and invokes a function with a role that may",
    run(g) {
      const functions = g.functions();
      return g.all("aws:scheduler/schedule:Schedule").flatMap((s) => {
        const target = s.inputs.target as { arn: string; roleArn: string };
        const problems: string[] = [];
        try {
          parseSchedule(String(s.inputs.scheduleExpression).replace(/^cron\((.*)\)$/, (_m, f: string) => `cron(${f})`));
        } catch (err) {
          problems.push(`${s.name}: ${(err as Error).message}`);
        }
        if (!functions.some((f) => f.arn === target.arn)) problems.push(`${s.name}: targets ${target.arn}, no function of the stack`);
        if (!allows(g.roleByArn(target.roleArn), "lambda:InvokeFunction", target.arn)) problems.push(`${s.name}: its role may not invoke ${target.arn}`);
        return problems;
      });
    },
  },
  {
    name: "the scheduler and the rescuer each have their safety-net cron",
    run(g) {
      const problems: string[] = [];
      const { scheduler, rescuer } = core(g, problems);
      const crons = g.all("aws:scheduler/schedule:Schedule").filter((s) => s.inputs.target?.input === "{}");
      for (const fn of [scheduler, rescuer]) if (fn && !crons.some((c) => c.inputs.target.arn === fn.arn)) problems.push(`${fn.name}: no cron invokes it`);
      return problems;
    },
  },
  {
    name: "every function logs to a log group of the stack, and the outputs name those log groups",
    run(g) {
      const groups = new Set(g.all("aws:cloudwatch/logGroup:LogGroup").map((l) => String(l.inputs.name)));
      const problems = g.functions().filter((f) => !f.logGroup || !groups.has(f.logGroup)).map((f) => `${f.name}: logs to ${f.logGroup}, no log group of the stack`);
      const { deathLogGroups, rescuerLogGroup } = g.synth.outputs;
      // The outputs are the app's choice (this repository's sst.config.ts has both); given, they must be right.
      if (deathLogGroups !== undefined) {
        const named = deathLogGroups as string[];
        const deaths = [...g.kind("runner"), ...g.kind("rescuer"), ...g.kind("scheduler")].map((f) => f.logGroup);
        for (const group of named) if (!groups.has(group)) problems.push(`output deathLogGroups names ${group}, no log group of the stack`);
        for (const group of deaths) if (!named.includes(String(group))) problems.push(`output deathLogGroups leaves out ${group}`);
      }
      const rescuer = g.kind("rescuer")[0];
      if (rescuerLogGroup !== undefined && rescuerLogGroup !== rescuer?.logGroup) problems.push(`output rescuerLogGroup is ${rescuerLogGroup}, not ${rescuer?.logGroup}`);
      return problems;
    },
  },
  ...alarmChecks(),
  {
    name: "the outputs point at the stack: the API URL, the alarm topic, the dashboard",
    run(g) {
      const problems: string[] = [];
      const { api, alarmTopic, dashboard } = g.synth.outputs;
      const urls = g.all("aws:lambda/functionUrl:FunctionUrl").map((u) => u.state.functionUrl);
      if (api !== undefined && !urls.includes(api)) problems.push(`output api is ${api}, no function URL of the stack`);
      if (alarmTopic !== undefined && alarmTopic !== core(g, problems).topicArn) problems.push("output alarmTopic is not the alarms' topic");
      const board = g.all("aws:cloudwatch/dashboard:Dashboard")[0];
      if (dashboard !== undefined && dashboard !== board?.inputs.dashboardName) problems.push("output dashboard is not the dashboard's name");
      return problems;
    },
  },
  {
    name: "every Leasehold function is linked to the database; the API to its token",
    run(g) {
      return g.functions().filter((f) => f.kind).flatMap((fn) => {
        const links = g.synth.built.find((b) => b.functionID === fn.name)?.links ?? [];
        const wanted = fn.kind === "api" ? ["DatabaseUrl", "ApiToken"] : ["DatabaseUrl"];
        return wanted.filter((l) => !links.includes(l)).map((l) => `${fn.name}: not linked to ${l}`);
      });
    },
  },
];

/** Every check's problems, by check name (only the failing ones). */
export function runChecks(g: Graph, checks: Check[] = CHECKS): Map<string, string[]> {
  return new Map(checks.map((c) => [c.name, c.run(g)] as const).filter(([, problems]) => problems.length > 0));
}
