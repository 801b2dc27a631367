import type { ParseArgsConfig } from "node:util";
import type { Context } from "./context.ts";

/** Parsed option values; each command reads its own through `option`. */
export type Values = Record<string, string | boolean | undefined>;

/** One `leasehold <name>` command: its help, its options, and what it does. */
export interface Command {
  name: string;
  /** One line for the command list. */
  summary: string;
  /** `leasehold <name> ...`, then its options and examples. */
  help: string;
  options: NonNullable<ParseArgsConfig["options"]>;
  run(ctx: Context, positionals: string[], values: Values): Promise<void>;
}

/** A string option's value, or undefined. */
export function option(values: Values, name: string): string | undefined {
  const value = values[name];
  return typeof value === "string" ? value : undefined;
}
