import { emitAndExit, type ChildArgs } from "./child-io.ts";

/**
 * One worker process: `node worker-child.js <leasehold|graphile|pgboss> <exec|hop|drain> '<json args>'`.
 * Each library is imported lazily, so a child loads only the library it runs.
 */
const [lib, mode, json] = process.argv.slice(2);
const args = JSON.parse(json ?? "{}") as ChildArgs;

const load = async () => {
  if (lib === "leasehold") return import("./leasehold.ts");
  if (lib === "graphile") return import("./graphile.ts");
  if (lib === "pgboss") return import("./pgboss.ts");
  throw new Error(`unknown library ${lib}`);
};

try {
  const m = await load();
  if (mode === "exec") emitAndExit(await m.childExec(args));
  else if (mode === "hop") emitAndExit(await m.childHop(args));
  else if (mode === "drain") emitAndExit(await m.childDrain(args));
  else throw new Error(`unknown mode ${mode}`);
} catch (err) {
  console.error(err);
  process.exit(1);
}
