/**
 * What Pulumi's mock runtime answers in place of the cloud providers: each
 * resource gets its inputs back plus what the provider would compute (an
 * auto-name, its ARN, a function URL), and the few data sources SST's
 * components call (region, partition, account, IAM policy documents) are
 * computed as the AWS provider computes them. Every resource is recorded,
 * with its real inputs. Deterministic: an auto-name's suffix is a hash of the
 * resource's name.
 */
import { createHash } from "node:crypto";

export const SYNTH_REGION = "us-east-1";
export const SYNTH_ACCOUNT = "123456789012";

/** One resource the program registered, with its inputs and the state the mock provider gave it. */
export interface SynthResource {
  type: string;
  name: string;
  custom: boolean;
  id: string;
  inputs: Record<string, any>;
  state: Record<string, any>;
}

interface ResourceArgs {
  type: string;
  name: string;
  inputs: Record<string, any>;
  custom?: boolean;
}

const hash = (text: string, length: number) => createHash("sha256").update(text).digest("hex").slice(0, length);

/** Pulumi's auto-name: the logical name and a suffix (random in a real deploy). */
const autoName = (name: string) => `${name}-${hash(name, 7)}`;

/** `aws:lambda/function:Function` -> `lambda`. */
const service = (type: string) => type.split(":")[1]?.split("/")[0] ?? "unknown";

function computed(args: ResourceArgs): Record<string, unknown> {
  const { type, inputs } = args;
  const name = typeof inputs.name === "string" ? inputs.name : autoName(args.name);
  const at = `${SYNTH_REGION}:${SYNTH_ACCOUNT}`;
  switch (type) {
    case "aws:lambda/function:Function": {
      const arn = `arn:aws:lambda:${at}:function:${name}`;
      return { name, arn, qualifiedArn: `${arn}:$LATEST`, invokeArn: `arn:aws:apigateway:${SYNTH_REGION}:lambda:path/2015-03-31/functions/${arn}/invocations` };
    }
    case "aws:iam/role:Role":
      return { name, arn: `arn:aws:iam::${SYNTH_ACCOUNT}:role/${name}`, id: name };
    case "aws:sns/topic:Topic":
      return { name, arn: `arn:aws:sns:${at}:${name}` };
    case "aws:cloudwatch/logGroup:LogGroup":
      return { name, arn: `arn:aws:logs:${at}:log-group:${name}` };
    case "aws:lambda/functionUrl:FunctionUrl":
      return { functionUrl: `https://${hash(args.name, 32)}.lambda-url.${SYNTH_REGION}.on.aws/` };
    case "aws:scheduler/schedule:Schedule":
      return { name, arn: `arn:aws:scheduler:${at}:schedule/default/${name}` };
    case "aws:cloudwatch/metricAlarm:MetricAlarm":
      return { name, arn: `arn:aws:cloudwatch:${at}:alarm:${name}` };
    case "random:index/randomBytes:RandomBytes":
      return { base64: Buffer.from(hash(args.name, 64), "hex").toString("base64"), hex: hash(args.name, 64) };
    default:
      return type.startsWith("aws:") ? { name, arn: `arn:aws:${service(type)}:${at}:${name}` } : {};
  }
}

/** A statement of `aws.iam.getPolicyDocument`, as the AWS provider renders it into JSON. */
function policyStatement(s: Record<string, any>): Record<string, unknown> {
  const one = (list: unknown) => (Array.isArray(list) && list.length === 1 ? list[0] : list);
  const principals = (s.principals ?? []) as { type: string; identifiers: string[] }[];
  return {
    ...(s.sid ? { Sid: s.sid } : {}),
    Effect: s.effect ?? "Allow",
    ...(s.actions ? { Action: one(s.actions) } : {}),
    ...(s.resources ? { Resource: one(s.resources) } : {}),
    ...(principals.length ? { Principal: Object.fromEntries(principals.map((p) => [p.type, one(p.identifiers)])) } : {}),
    ...(s.conditions?.length ? { Condition: s.conditions } : {}),
  };
}

function call(token: string, inputs: Record<string, any>): Record<string, unknown> {
  switch (token) {
    case "aws:index/getRegion:getRegion":
      return { id: SYNTH_REGION, name: SYNTH_REGION, region: SYNTH_REGION, endpoint: `ec2.${SYNTH_REGION}.amazonaws.com`, description: "US East (N. Virginia)" };
    case "aws:index/getPartition:getPartition":
      return { id: "aws", partition: "aws", dnsSuffix: "amazonaws.com", reverseDnsPrefix: "com.amazonaws" };
    case "aws:index/getCallerIdentity:getCallerIdentity":
      return { id: SYNTH_ACCOUNT, accountId: SYNTH_ACCOUNT, arn: `arn:aws:iam::${SYNTH_ACCOUNT}:user/synth`, userId: "synth" };
    case "aws:iam/getPolicyDocument:getPolicyDocument": {
      const statements = ((inputs.statements ?? []) as Record<string, any>[]).map(policyStatement);
      const json = JSON.stringify({ Version: "2012-10-17", Statement: statements }, null, 2);
      return { id: hash(json, 10), json, minifiedJson: JSON.stringify(JSON.parse(json)), statements: inputs.statements };
    }
    default:
      throw new Error(`synth: no offline answer for the data source ${token}: it needs an AWS account`);
  }
}

/** The mocks for `pulumi.runtime.setMocks`, recording every resource into `resources`. */
export function recordingMocks(resources: SynthResource[]) {
  return {
    newResource(args: ResourceArgs) {
      const state = { ...args.inputs, ...computed(args) };
      const id = String(state.id ?? (args.custom ? `${args.name}-id` : ""));
      resources.push({ type: args.type, name: args.name, custom: args.custom ?? false, id, inputs: args.inputs, state });
      return { id, state };
    },
    call(args: { token: string; inputs: Record<string, any> }) {
      return call(args.token, args.inputs);
    },
  };
}
