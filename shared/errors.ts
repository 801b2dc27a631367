/** A caller's mistake: bad payload or options. Nothing was written. */
export class ValidationError extends Error {
  override name = "ValidationError";
  constructor(
    message: string,
    /** Each problem with the path of the field it concerns. */
    readonly issues: { path: (string | number)[]; message: string }[],
  ) {
    super(message);
  }
}

export class UnknownJobTypeError extends Error {
  override name = "UnknownJobTypeError";
  constructor(readonly jobName: string) {
    super(`unknown job type: ${jobName}`);
  }
}
