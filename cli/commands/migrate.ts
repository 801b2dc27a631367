import { migrate } from "../../shared/db/migrate.ts";
import { expectPositionals } from "../args.ts";
import type { Command } from "../command.ts";

export const migrateCommand: Command = {
  name: "migrate",
  summary: "Apply the migrations not yet applied (safe to run again)",
  help: `leasehold migrate

Creates the schema if needed and applies each pending migration in its own
transaction. Running it again changes nothing.`,
  options: {},
  async run(ctx, positionals) {
    expectPositionals(positionals, []);
    const applied = await migrate(ctx.pool(), ctx.schema);
    ctx.output({ schema: ctx.schema, applied }, () =>
      applied.length ? `applied migrations ${applied.join(", ")} to schema ${ctx.schema}` : `schema ${ctx.schema} is up to date`,
    );
  },
};
