/**
 * What a function sees of "being on Lambda": its environment variables, its
 * ARN, and the REPORT line Lambda writes after each invocation.
 */
import { randomBytes } from "node:crypto";
import type { FunctionSpec } from "../../shared/settings/function-specs.ts";
import { writeEnvironment } from "../../shared/settings/environment.ts";
import type { InvocationReport } from "./environment.ts";

export const LOCAL_REGION = "us-east-1";
export const LOCAL_ACCOUNT_ID = "123456789012";
/** Host variables a process needs to work at all; nothing else leaks in from the parent. */
const INHERITED = ["PATH", "HOME", "TMPDIR", "LANG", "SYSTEMROOT"];

/**
 * What infra sets on the deployed functions (shared/settings/environment.ts,
 * DEPLOYED_ENVIRONMENT), with this runtime's values: its functions are named
 * as in the config, and its EventBridge Scheduler takes any role.
 */
const LOCAL_DEPLOYED = writeEnvironment<string>({
  schedulerFunction: "scheduler",
  rescuerFunction: "rescuer",
  wakeRoleArn: `arn:aws:iam::${LOCAL_ACCOUNT_ID}:role/leasehold-local-wake`,
});

export function functionArn(name: string): string {
  return `arn:aws:lambda:${LOCAL_REGION}:${LOCAL_ACCOUNT_ID}:function:${name}`;
}

export interface EnvironmentInputs {
  rootDir: string;
  /** This runtime's URL, so functions that invoke functions reach it. */
  endpoint: string;
  extra: Record<string, string>;
}

/** Lambda's reserved variables, then the spec's environment, then the caller's extras. */
export function functionEnvironment(spec: FunctionSpec, inputs: EnvironmentInputs): Record<string, string> {
  const host = Object.fromEntries(INHERITED.flatMap((key) => (process.env[key] ? [[key, process.env[key]]] : [])));
  const date = new Date().toISOString().slice(0, 10).replaceAll("-", "/");
  return {
    ...host,
    AWS_LAMBDA_FUNCTION_NAME: spec.name,
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(spec.memoryMb),
    AWS_LAMBDA_FUNCTION_TIMEOUT: String(spec.timeoutSeconds),
    AWS_LAMBDA_FUNCTION_VERSION: "$LATEST",
    AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${spec.name}`,
    AWS_LAMBDA_LOG_STREAM_NAME: `${date}/[$LATEST]${randomBytes(16).toString("hex")}`,
    AWS_LAMBDA_INITIALIZATION_TYPE: "on-demand",
    AWS_EXECUTION_ENV: `AWS_Lambda_nodejs${process.versions.node.split(".")[0]}.x`,
    AWS_REGION: LOCAL_REGION,
    AWS_DEFAULT_REGION: LOCAL_REGION,
    AWS_ACCESS_KEY_ID: "local",
    AWS_SECRET_ACCESS_KEY: "local",
    AWS_SESSION_TOKEN: "local",
    AWS_ENDPOINT_URL_LAMBDA: inputs.endpoint,
    AWS_ENDPOINT_URL_SCHEDULER: inputs.endpoint,
    LAMBDA_TASK_ROOT: inputs.rootDir,
    LEASEHOLD_LAMBDA_ARN: functionArn(spec.name),
    TZ: "UTC",
    _HANDLER: spec.handler,
    ...LOCAL_DEPLOYED,
    ...spec.environment,
    ...inputs.extra,
  };
}

/** Lambda's `REPORT RequestId: … Duration: … Billed Duration: …` line. */
export function reportLine(requestId: string, report: InvocationReport, memoryMb: number): string {
  const parts = [
    `REPORT RequestId: ${requestId}`,
    `Duration: ${report.durationMs.toFixed(2)} ms`,
    `Billed Duration: ${Math.ceil(report.durationMs)} ms`,
    `Memory Size: ${memoryMb} MB`,
    `Max Memory Used: ${Math.ceil(report.maxRssMb)} MB`,
  ];
  if (report.initMs !== undefined) parts.push(`Init Duration: ${report.initMs.toFixed(2)} ms`);
  const { outcome } = report;
  if (outcome.kind === "error" && outcome.cause !== "handler") parts.push(`Status: ${outcome.cause === "timeout" ? "timeout" : "error"}`);
  return parts.join("\t");
}
