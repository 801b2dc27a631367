/** What the CLI's exit codes mean; `docs/cli.md` lists them for scripts. */
export const EXIT = {
  ok: 0,
  /** The database is unreachable, a query failed, or anything unexpected. */
  failed: 1,
  /** Bad command line, bad job id, or a payload its job type refuses. Nothing was written. */
  usage: 2,
  notFound: 3,
  /** The job exists but is in the wrong state for the action. */
  conflict: 4,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An error the CLI expected: printed as is, with its exit code and no stack. */
export class CliError extends Error {
  override name = "CliError";
  constructor(
    readonly exitCode: ExitCode,
    message: string,
    /** A short machine-readable reason, for `--json` error documents. */
    readonly reason: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export const usageError = (message: string, details?: Record<string, unknown>) =>
  new CliError(EXIT.usage, message, "usage", details);
