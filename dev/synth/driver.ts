/**
 * Runs a bundled SST program (see dev/synth/synth.ts) under Pulumi's mock
 * runtime, in a process of its own, and writes every resource it registered
 * and its outputs as JSON. Bundled next to the program in .sst/platform, so
 * `@pulumi/pulumi` is the platform's own, the one SST's components use.
 * Usage: node driver.mjs <program.mjs> <graph.json> <app> <stage>
 */
import * as pulumi from "@pulumi/pulumi";
import { writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { recordingMocks, type SynthResource } from "./mocks.ts";

/** Stands in for the values of `sst secret set`, which only a deploy reads: each secret asked for gets a placeholder, and is named. */
const SECRET = "SST_SECRET_";
const secretsAsked = new Set<string>();
const env = process.env;
process.env = new Proxy(env, {
  get(target, key) {
    if (typeof key === "string" && key.startsWith(SECRET) && target[key] === undefined) {
      secretsAsked.add(key.slice(SECRET.length));
      return `synth-placeholder-${key.slice(SECRET.length)}`;
    }
    return target[key as string];
  },
});

const [program, graphFile, app, stage] = process.argv.slice(2) as [string, string, string, string];
const failures: string[] = [];
process.on("unhandledRejection", (err) => void failures.push(err instanceof Error ? err.message : String(err)));

const resources: SynthResource[] = [];
await pulumi.runtime.setMocks(recordingMocks(resources), app, stage, false);
let outputs: unknown;
try {
  await pulumi.runtime.runInPulumiStack(async () => {
    const result = (await import(pathToFileURL(program).href)).default as Record<string, unknown>;
    outputs = await new Promise((resolve) => pulumi.output(result).apply(resolve));
    return result;
  });
  await pulumi.runtime.disconnect();
} catch (err) {
  failures.push(err instanceof Error ? err.message : String(err));
}
writeFileSync(graphFile, JSON.stringify({ resources, outputs, secrets: [...secretsAsked].sort(), failures }));
process.exit(failures.length > 0 ? 1 : 0);
