import { bundleEdgeWorker } from "../../dev/edge-bundle.ts";
import { Miniflare, kCurrentWorker, type Request as MfRequest } from "miniflare";
import { inject } from "vitest";
import { databaseUrl } from "./db.ts";
import { EDGE_COMPATIBILITY, EDGE_ENV } from "../../shared/settings/environment.ts";

/**
 * The edge Worker in the real workerd runtime: bundled with esbuild for a
 * Workers-like platform (no Node built-ins), run by miniflare with its
 * runner bound to itself, reaching the test Postgres through the WebSocket
 * relay, and its oracle a function here.
 */
const bundles = new Map<string, Promise<string>>();

/** The Worker bundled with the test relay built in: the deployed Worker has no binding for one. */
export function bundleWorker(entry = "test/fixtures/edge/worker.ts"): Promise<string> {
  let bundle = bundles.get(entry);
  if (!bundle) {
    bundle = bundleEdgeWorker(entry, { wsProxy: inject("wsRelay") });
    bundles.set(entry, bundle);
  }
  return bundle;
}

export const RUNNER_SECRET = "edge-test-runner-secret-0123456789";
export const API_TOKEN = "edge-test-api-token-0123456789";
export const CRON = "* * * * *";

export interface OracleHit {
  event: "start" | "end" | "aborted";
  job: string;
  attempt: number;
  runner: string;
  at: number;
}

/** Config for the edge tests: one edge runner on `default`, no Lambda runner, quick to go idle. */
export function edgeTestConfig(runner: Record<string, unknown> = {}, scheduler: Record<string, unknown> = {}) {
  return {
    runners: {},
    connectionBudget: 40,
    edge: {
      runners: { "edge-runner": { queues: ["default"], slots: 10, wallMs: 30_000, maxLeaseMs: 10_000, idleMs: 500, pollMs: 50, maxConcurrency: 4, ...runner } },
      scheduler: { wallMs: 3_000, pollMs: 200, ...scheduler },
    },
  };
}

export interface EdgeOptions {
  schema: string;
  config?: object;
  /** Handler starts and ends, as the edge handlers reported them. */
  oracle?: OracleHit[];
  /** The Worker's structured log lines (its console, parsed). */
  logs?: Record<string, unknown>[];
  secret?: string;
}

export async function startEdge(o: EdgeOptions): Promise<Miniflare> {
  const oracle = o.oracle ?? [];
  const logs = o.logs;
  const mf = new Miniflare({
    name: "leasehold-edge",
    modules: true,
    script: await bundleWorker(),
    compatibilityDate: EDGE_COMPATIBILITY.date,
    compatibilityFlags: [...EDGE_COMPATIBILITY.flags],
    structuredWorkerdLogs: true,
    handleStructuredLogs: ({ message }: { message: string }) => {
      if (!logs) return;
      try {
        logs.push(JSON.parse(message) as Record<string, unknown>);
      } catch {
        logs.push({ message });
      }
    },
    // Named as the Worker reads them, and as infra binds them (EDGE_ENV).
    bindings: {
      [EDGE_ENV.databaseUrl]: databaseUrl(),
      [EDGE_ENV.schema]: o.schema,
      [EDGE_ENV.config]: JSON.stringify(o.config ?? edgeTestConfig()),
      [EDGE_ENV.runnerSecret]: o.secret ?? RUNNER_SECRET,
      [EDGE_ENV.apiToken]: API_TOKEN,
    },
    serviceBindings: {
      [EDGE_ENV.runnerService]: kCurrentWorker,
      ORACLE: async (request: MfRequest) => {
        const url = new URL(request.url);
        const q = url.searchParams;
        oracle.push({
          event: url.pathname.slice(1) as OracleHit["event"],
          job: q.get("job")!, attempt: Number(q.get("attempt")), runner: q.get("runner")!, at: Date.now(),
        });
        return new Response("ok");
      },
    },
  });
  await mf.ready;
  return mf;
}

/** Fires the Cron Trigger as Workers would; resolves when the invocation (and its waitUntil) ends. */
export async function fireCron(mf: Miniflare, cron = CRON): Promise<void> {
  // Fetcher.scheduled() is in miniflare's runtime, not in its Node-side typings.
  const worker = (await mf.getWorker()) as unknown as {
    scheduled(o: { cron: string; scheduledTime: Date }): Promise<{ outcome: string }>;
  };
  const result = await worker.scheduled({ cron, scheduledTime: new Date() });
  if (result.outcome !== "ok") throw new Error(`scheduled event ended ${result.outcome}`);
}

/** Enqueues through the edge API's batch route (a Hono route in workerd). */
export async function enqueueOnEdge(mf: Miniflare, jobs: { name: string; payload: unknown; leaseMs?: number }[]): Promise<string[]> {
  const res = await mf.dispatchFetch("https://edge/v1/jobs/batch", {
    method: "POST",
    headers: { authorization: `Bearer ${API_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ jobs }),
  });
  if (res.status !== 201 && res.status !== 200) throw new Error(`enqueue answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { jobs: { id: string }[] }).jobs.map((j) => j.id);
}

/** Starts one edge runner directly (as the scheduler does), returning its response. */
export function postRun(mf: Miniflare, body: object, secret: string | null = RUNNER_SECRET) {
  return mf.dispatchFetch("https://edge/leasehold/run", {
    method: "POST",
    headers: { "content-type": "application/json", ...(secret === null ? {} : { "x-leasehold-runner-secret": secret }) },
    body: JSON.stringify(body),
  });
}

/** Runs one edge runner to its end and returns its summary. */
export async function runOnEdge(mf: Miniflare, runner = "edge-runner"): Promise<Record<string, unknown>> {
  const res = await postRun(mf, { runner, invocationId: crypto.randomUUID() });
  if (res.status !== 200) throw new Error(`runner answered ${res.status}: ${await res.text()}`);
  return JSON.parse(await res.text()) as Record<string, unknown>;
}

/** Polls `check` every 50 ms until it holds, failing after `ms`. */
export async function until(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
