/**
 * Leasehold as an SST component (`leasehold/sst`): everything a deployment
 * is, from the app's own jobs module and config.
 *
 * ```ts
 * // sst.config.ts
 * const { Leasehold } = await import("leasehold/sst");
 * const jobs = new Leasehold("Leasehold", { config: (await import("./leasehold.config")).default, recurring });
 * new sst.aws.Function("AppApi", { handler: "src/api.handler", link: [jobs] });
 * ```
 *
 * It makes the runners, scheduler and rescuer (each a generated entry that
 * calls its handler factory with the app's jobs and config), migrate-on-
 * deploy, the safety-net crons and wake-up role, one EventBridge schedule per
 * recurring job, the alarms and their topic, the CloudWatch dashboard, the
 * Leasehold API (function URL, dashboard page) and, with `config.edge`, the
 * consumer on Cloudflare Workers. Linking the component to a function grants
 * what an enqueue needs: the database URL and waking the scheduler.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { defineConfig, type Config, type ConfigInput } from "../shared/settings/config.ts";
import { ENTRIES_DIR } from "../shared/settings/function-specs.ts";
import type { RecurringJob } from "../shared/jobs/recurring.ts";
import { componentChild } from "../shared/settings/deployed.ts";
import { entryHandler, writeEntries } from "../functions/entries.ts";
import { createAlarms } from "./alarms.ts";
import type { InfraContext } from "./context.ts";
import { createDashboard } from "./dashboard.ts";
import { createEdge } from "./edge.ts";
import { createFunctions } from "./functions.ts";
import { createMigration } from "./migrate.ts";

export interface LeaseholdArgs {
  /** The app's config: `leasehold.config.ts`'s default export. */
  config: ConfigInput | Config;
  /** The app's recurring jobs (its jobs module's `recurring`), one EventBridge schedule each. */
  recurring?: readonly RecurringJob[];
  /** The Postgres URL secret; default `new sst.Secret("DatabaseUrl")`. */
  databaseUrl?: sst.Secret;
  /** The API's bearer token secret; default `new sst.Secret("ApiToken")`. */
  apiToken?: sst.Secret;
  /** Subscribes this address to the alarms (AWS sends a confirmation); default $LEASEHOLD_ALARM_EMAIL. */
  alarmEmail?: string;
}

/**
 * Where the handler factories and the migrations are, seen from the app:
 * the installed package (`node_modules/leasehold`), or this repository
 * itself when it deploys its own example app.
 */
function packageLayout(root: string) {
  const own = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { name?: string };
  if (own.name === "leasehold") {
    return { factories: join(root, "functions/lambda.ts"), edgeFactories: join(root, "functions/edge/worker.ts"), migrations: join(root, "migrations") };
  }
  const installed = join(root, "node_modules", "leasehold");
  if (!existsSync(installed)) throw new Error("Leasehold: the leasehold package is not installed in this app (npm install leasehold)");
  return { factories: "leasehold/lambda", edgeFactories: "leasehold/edge", migrations: join(installed, "dist", "migrations") };
}

export class Leasehold {
  readonly config: Config;
  readonly runners: Record<string, sst.aws.Function>;
  readonly scheduler: sst.aws.Function;
  readonly rescuer: sst.aws.Function;
  readonly api: sst.aws.Function;
  readonly databaseUrl: sst.Secret;
  readonly apiToken: sst.Secret;
  readonly alarmTopic: sst.aws.SnsTopic;
  readonly dashboard: aws.cloudwatch.Dashboard;
  readonly edge: { runner: sst.cloudflare.Worker; cron: sst.cloudflare.Cron } | undefined;
  /** Link this to a function that enqueues: the database URL, the schema, and the right to wake the scheduler. */
  readonly link: sst.Linkable<Record<string, $util.Input<string>>>;

  constructor(name: string, args: LeaseholdArgs) {
    const config = defineConfig(args.config as ConfigInput);
    const root = $cli.paths.root;
    const layout = packageLayout(root);
    const child = (resource: string) => componentChild(name, resource);
    const dir = join(root, ENTRIES_DIR, componentChild(name, ""));
    const files = writeEntries({
      dir, jobsModule: join(root, config.jobs), config, factories: layout.factories,
      edgeFactories: config.edge ? layout.edgeFactories : undefined,
    });
    const handler = (file: string) => entryHandler(root, file);
    this.config = config;
    this.databaseUrl = args.databaseUrl ?? new sst.Secret("DatabaseUrl");
    this.apiToken = args.apiToken ?? new sst.Secret("ApiToken");
    const ctx: InfraContext = {
      name, child, config,
      recurring: args.recurring ?? [],
      handlers: {
        runner: handler(files.runner), scheduler: handler(files.scheduler), rescuer: handler(files.rescuer),
        api: handler(files.api), migrate: handler(files.migrate),
      },
      edgeHandler: files.edge ? files.edge.slice(root.length + 1) : undefined,
      databaseUrl: this.databaseUrl,
      apiToken: this.apiToken,
      alarmEmail: args.alarmEmail ?? process.env.LEASEHOLD_ALARM_EMAIL,
      migrationsDir: layout.migrations,
    };
    const { migration } = createMigration(ctx);
    const fns = createFunctions(ctx, migration);
    this.runners = fns.runners;
    this.scheduler = fns.scheduler;
    this.rescuer = fns.rescuer;
    this.api = fns.api;
    this.alarmTopic = createAlarms(ctx, fns.runners).alarmTopic;
    this.dashboard = createDashboard(ctx, fns.runners);
    this.edge = createEdge(ctx, migration);
    // `Resource.<name>` in a linked function: what linkedLeasehold() (leasehold/waker) reads.
    this.link = new sst.Linkable(name, {
      properties: {
        schema: config.schema, databaseUrl: this.databaseUrl.value, schedulerFunction: fns.scheduler.name,
        schedulerArn: fns.scheduler.arn, wakeRoleArn: fns.wake.wakeRole.arn, wakePrefix: fns.wake.wakePrefix,
      },
      include: [
        sst.aws.permission({ actions: ["lambda:InvokeFunction"], resources: [fns.scheduler.arn] }),
        // The at() fallback of a wake-up whose Invoke is slow (functions/waker.ts).
        ...fns.armWakes.map((p) => sst.aws.permission(p)),
      ],
    });
  }

  /**
   * Log groups where "job dead" lines are written: every runner, the rescuer,
   * and the scheduler (it rescues a lease it watches as soon as it expires).
   */
  get deathLogGroups() {
    return [...Object.values(this.runners), this.rescuer, this.scheduler].map(logGroupName);
  }

  /** The rescuer's log group. */
  get rescuerLogGroup() {
    return logGroupName(this.rescuer);
  }
}

/**
 * The log group SST created for `fn`, where its output goes. Not
 * `/aws/lambda/<function name>`: SST names the group with a suffix of its own
 * and points the function's logging at it.
 */
function logGroupName(fn: sst.aws.Function): $util.Output<string> {
  return fn.nodes.logGroup.apply((group) => {
    if (!group) throw new Error("Leasehold: a function has no log group of its own (logging disabled?)");
    return group.name;
  });
}
