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

/**
 * Thrown by a handler to fail its job for good: the job ends `dead` at once,
 * with this message as its reason, whatever attempts it has left (as Oban's
 * cancel and River's `JobCancel`). For input that no retry can fix.
 */
export class PermanentError extends Error {
  override name = "PermanentError";
}
