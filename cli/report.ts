import { ValidationError } from "../shared/errors.ts";
import { maskUrl } from "./context.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";

/** Where the failure happened, for hints and for scrubbing secrets. */
export interface FailureScope {
  json: boolean;
  /** Strings never to print (the database URL and password). */
  secrets: string[];
  /** The masked database URL, when one was chosen. */
  database?: string;
  usingDevDefault?: boolean;
  /** The command run, for the "see --help" pointer. */
  command?: string;
}

interface Failure {
  exitCode: ExitCode;
  reason: string;
  message: string;
  details: Record<string, unknown>;
  hint?: string;
}

const MISSING_SCHEMA = new Set(["42P01", "42704", "3F000"]); // undefined table, type, schema
const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ETIMEDOUT", "ECONNRESET", "EAI_AGAIN"]);

function classify(err: unknown, scope: FailureScope): Failure {
  if (err instanceof CliError) return { exitCode: err.exitCode, reason: err.reason, message: err.message, details: err.details };
  if (err instanceof ValidationError) {
    return { exitCode: EXIT.usage, reason: "invalid", message: err.message, details: { issues: err.issues } };
  }
  const code = (err as { code?: unknown })?.code;
  if (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS_")) {
    return { exitCode: EXIT.usage, reason: "usage", message: (err as Error).message, details: {} };
  }
  // AggregateError (IPv4 and IPv6 both refused) has an empty message: fall back to its code.
  const message = (err as Error)?.message || (typeof code === "string" ? code : String(err));
  let hint: string | undefined;
  if (typeof code === "string" && MISSING_SCHEMA.has(code)) hint = "is the schema migrated? run `leasehold migrate`";
  else if ((typeof code === "string" && UNREACHABLE.has(code)) || /timeout|terminated/i.test(message)) {
    hint = scope.usingDevDefault
      ? `cannot reach the dev stack's Postgres at ${scope.database}: start it with \`npm run dev\`, or set DATABASE_URL`
      : `cannot reach the database at ${scope.database}`;
  }
  return { exitCode: EXIT.failed, reason: "failed", message, details: typeof code === "string" ? { code } : {}, hint };
}

// Longest first, so a URL is masked whole before its \`:password@\` part is.
const scrub = (text: string, secrets: string[]) =>
  [...secrets].sort((a, b) => b.length - a.length).reduce((t, s) => t.split(s).join(s.startsWith(":") ? ":***@" : maskUrl(s)), text);

/** Prints the failure (a JSON document on stdout with --json, else lines on stderr) and returns its exit code. */
export function reportFailure(err: unknown, scope: FailureScope): ExitCode {
  const failure = classify(err, scope);
  if (scope.json) {
    const { exitCode, reason, message, details, hint } = failure;
    const doc = { error: { reason, exitCode, message, ...details, ...(hint ? { hint } : {}) } };
    process.stdout.write(`${scrub(JSON.stringify(doc, null, 2), scope.secrets)}\n`);
  } else {
    const issues = (failure.details.issues as { path: (string | number)[]; message: string }[] | undefined) ?? [];
    const lines = [
      `leasehold: ${failure.message}`,
      ...issues.map((i) => `  ${i.path.join(".") || "(payload)"}: ${i.message}`),
      ...(failure.hint ? [`  hint: ${failure.hint}`] : []),
      ...(failure.exitCode === EXIT.usage && failure.reason === "usage" ? [`  see: leasehold ${scope.command ? `${scope.command} ` : ""}--help`] : []),
    ];
    process.stderr.write(`${scrub(lines.join("\n"), scope.secrets)}\n`);
  }
  return failure.exitCode;
}
