import { expectPositionals } from "../args.ts";
import type { Command } from "../command.ts";
import { checkInfra } from "../infra-check.ts";

export const checkCommand: Command = {
  name: "check",
  summary: "Check the app's stack offline: SST's real types, bundled as sst deploy does, then synthesized with SST's component code and checked",
  help: `leasehold check [--platform-only]

Checks the app in the working directory without an AWS account or a deploy:
type-checks sst.config.ts and everything it imports (the Leasehold
component's arguments, your config and jobs) against SST's real component
types, then bundles sst.config.ts with esbuild as \`sst deploy\` does, then
synthesizes the stack: run() with SST's own component code under Pulumi's
mock runtime (no AWS account, no network), every resource it would create
checked (handlers in their bundles, environment, IAM roles, on-failure
destinations, schedules, log groups, alarms, outputs). Each problem is
printed (file:line:column, or the check's name); exit code 1 when there is one.

The SST platform (.sst/platform) is installed first when it is missing or
for another sst version (\`sst install\`, from the npm cache where it can:
no Bun, no dependency check, no telemetry).

Options:
  --platform-only   only install the SST platform`,
  options: { "platform-only": { type: "boolean" } },
  async run(ctx, positionals, values) {
    expectPositionals(positionals, []);
    await checkInfra({ root: process.cwd(), platformOnly: values["platform-only"] === true, progress: (l) => ctx.progress(l) });
  },
};
