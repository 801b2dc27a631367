/**
 * Reading a synthesized stack (dev/synth/synth.ts): its functions with their
 * role, log group, environment and build; IAM statements; references by
 * value (an ARN or a name), which is how the resources point at each other.
 */
import type { SynthGraph } from "./synth.ts";
import type { SynthResource } from "./mocks.ts";

/** Pulumi's marker of a secret value in serialized inputs. */
const SECRET_SIG = "4dabf18193072939515e22adb298388d";

/** Inputs with Pulumi's secret wrappers taken off. */
export function unwrap(value: any): any {
  if (Array.isArray(value)) return value.map(unwrap);
  if (value && typeof value === "object") {
    if (SECRET_SIG in value) return unwrap(value.value);
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, unwrap(v)]));
  }
  return value;
}

/** A named check of a synthesized stack: its problems, none when it holds. */
export interface Check {
  name: string;
  run(g: Graph): string[];
}

export interface Statement {
  Effect: string;
  Action: string[];
  Resource: string[];
}

const list = (v: unknown): string[] => (v === undefined ? [] : Array.isArray(v) ? v.map(String) : [String(v)]);

function statements(policy: unknown): Statement[] {
  const doc = (typeof policy === "string" ? JSON.parse(policy) : policy) as { Statement?: Record<string, unknown>[] } | undefined;
  return (doc?.Statement ?? []).map((s) => ({ Effect: String(s.Effect ?? "Allow"), Action: list(s.Action), Resource: list(s.Resource) }));
}

/** A deployed function, as SST's `sst.aws.Function` makes it. */
export interface SynthFunction {
  /** The component's name ("Runner", "Scheduler", ...). */
  name: string;
  /** Its generated entry's kind for Leasehold's own functions ("runner", "api", ...); undefined for an app's own. */
  kind: string | undefined;
  lambda: Record<string, any>;
  arn: string;
  functionName: string;
  env: Record<string, string>;
  role: Role | undefined;
  logGroup: string | undefined;
}

export interface Role {
  name: string;
  arn: string;
  /** The services (or accounts) that may assume it. */
  principals: string[];
  statements: Statement[];
}

export class Graph {
  readonly resources: SynthResource[];
  constructor(readonly synth: SynthGraph) {
    this.resources = synth.resources.map((r) => ({ ...r, inputs: unwrap(r.inputs), state: unwrap(r.state) }));
  }

  all(type: string): SynthResource[] {
    return this.resources.filter((r) => r.type === type);
  }

  one(type: string, name: string): SynthResource | undefined {
    return this.resources.find((r) => r.type === type && r.name === name);
  }

  roles(): Role[] {
    const inline = this.all("aws:iam/rolePolicy:RolePolicy");
    return this.all("aws:iam/role:Role").map((r) => {
      const assume = statementsWithPrincipals(r.inputs.assumeRolePolicy);
      const own = ((r.inputs.inlinePolicies ?? []) as { policy: string }[]).flatMap((p) => statements(p.policy));
      const attached = inline.filter((p) => p.inputs.role === r.state.id || p.inputs.role === r.state.name).flatMap((p) => statements(p.inputs.policy));
      return { name: r.name, arn: String(r.state.arn), principals: assume, statements: [...own, ...attached] };
    });
  }

  roleByArn(arn: string): Role | undefined {
    return this.roles().find((r) => r.arn === arn);
  }

  functions(): SynthFunction[] {
    const roles = this.roles();
    return this.all("sst:aws:Function").flatMap((c) => {
      const fn = this.one("aws:lambda/function:Function", `${c.name}Function`);
      if (!fn) return [];
      const lambda = fn.inputs;
      return [{
        name: c.name,
        kind: /^\.leasehold\/functions\/(\w+)\.handler$/.exec(String(lambda.handler))?.[1],
        lambda,
        arn: String(fn.state.arn),
        functionName: String(fn.state.name),
        env: (lambda.environment?.variables ?? {}) as Record<string, string>,
        role: roles.find((r) => r.arn === lambda.role),
        logGroup: lambda.loggingConfig?.logGroup,
      }];
    });
  }

  /** Leasehold's functions of one kind. */
  kind(kind: string): SynthFunction[] {
    return this.functions().filter((f) => f.kind === kind);
  }
}

function statementsWithPrincipals(policy: unknown): string[] {
  const doc = (typeof policy === "string" ? JSON.parse(policy) : policy) as { Statement?: { Principal?: Record<string, unknown> }[] } | undefined;
  return (doc?.Statement ?? []).flatMap((s) => Object.values(s.Principal ?? {}).flatMap(list));
}

/** Does `pattern` (an IAM resource, `*` a wildcard) cover `arn`? */
export function covers(pattern: string, arn: string): boolean {
  const re = new RegExp(`^${pattern.split("*").map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`);
  return re.test(arn);
}

/** Does the role allow `action` on `arn`? */
export function allows(role: Role | undefined, action: string, arn: string): boolean {
  return (role?.statements ?? []).some((s) => s.Effect === "Allow" && s.Action.some((a) => covers(a, action)) && s.Resource.some((r) => covers(r, arn)));
}
