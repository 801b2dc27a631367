import { closePool } from "../../shared/db/db.ts";
import * as z from "zod";
import { RUNNER_MARGIN_MS } from "../../shared/settings/config.ts";
import { EDGE_ENV } from "../../shared/settings/environment.ts";
import type { Registry } from "../../shared/jobs/job.ts";
import { servingRules } from "../../shared/settings/serving.ts";
import { runSession } from "../../shared/runner/session.ts";
import { environmentLinger } from "../../shared/runner/linger.ts";
import type { WorkerSummary } from "../../shared/runner/worker.ts";
import { tokenMatches } from "../api/auth.ts";
import { edgeConfig, edgeLog, edgeReportDeaths, edgeSchema, edgeSecret, openEdgePool, type EdgeEnv, type WaitUntil } from "./env.ts";

/**
 * The edge runner: one Worker invocation per runner, started by the edge
 * scheduler's fetch (`POST /leasehold/run`) with the shared secret. It answers
 * at once with a streamed body, which the scheduler holds open, then drains
 * its queues exactly as the Lambda runner does (`runSession`), counting its
 * remaining time down from the configured wall-time budget (Workers have no
 * remaining-time clock), and ends the body with its summary. Its Neon pool
 * lives and dies within the invocation. Unlike the Lambda runner, it wakes
 * nothing when it leaves a retry or a released job behind
 * (`summary.leftQueued`): the edge has no wake-up path, and the edge
 * scheduler's next Cron Trigger (each minute) starts it, up to 60 s late.
 */
export const RUN_PATH = "/leasehold/run";
export const SECRET_HEADER = "x-leasehold-runner-secret";

const bodySchema = z.object({
  /** The edge runner's name in config.edge.runners. */
  runner: z.string().min(1).max(100),
  /** Reservation id the scheduler recorded for this invocation. */
  invocationId: z.string().min(1).max(100),
});

export async function handleRun(request: Request, env: EdgeEnv, ctx: WaitUntil, registry: Registry): Promise<Response> {
  const startedAt = Date.now();
  // Compared in constant time, even when missing, so timing tells nothing.
  const given = request.headers.get(SECRET_HEADER) ?? "";
  const secret = edgeSecret(env, "runnerSecret");
  if (!secret || !(await tokenMatches(secret, given)) || !given) {
    return Response.json({ error: "unauthorized" }, { status: 401 });
  }
  if (request.method !== "POST") return Response.json({ error: "method not allowed" }, { status: 405 });
  const parsed = bodySchema.safeParse(await request.json().catch(() => null));
  if (!parsed.success) return Response.json({ error: z.prettifyError(parsed.error) }, { status: 400 });
  const { config, edge } = edgeConfig(env);
  const { runner: name, invocationId } = parsed.data;
  const runner = edge.runners[name];
  if (!runner) return Response.json({ error: `no edge runner named ${name}` }, { status: 404 });

  const pool = openEdgePool(env, edge.connectionsPerRunner);
  const store = { db: pool, schema: edgeSchema(env) };
  const runnerId = crypto.randomUUID();
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const done = (async () => {
    let summary: WorkerSummary | { error: string };
    try {
      summary = await runSession({
        store, registry, runnerId, invocationId,
        runner: name,
        requestId: runnerId,
        queues: runner.queues,
        slots: runner.slots,
        prefetch: runner.prefetch,
        fair: runner.fair,
        maxLeaseMs: runner.maxLeaseMs,
        remainingMs: () => runner.wallMs - (Date.now() - startedAt),
        marginMs: RUNNER_MARGIN_MS,
        idleMs: runner.idleMs,
        // Per isolate, as a Lambda runner's per environment: arrivals seen by earlier runs count.
        linger: runner.linger === "fixed" ? "fixed" : environmentLinger(name, runner.pollMs, runner.idleMs),
        pollMs: runner.pollMs,
        // Waiting for work, one of its connections listens for enqueues; with one, it only polls.
        bell: edge.connectionsPerRunner > 1,
        log: edgeLog,
        // A handler's follow-ups are refused, as the API refuses them, when no runner could run them.
        limits: { serving: servingRules(config) },
        reportDeaths: edgeReportDeaths(env),
      });
      edgeLog.info("runner done", { runnerId, runner: name, ...summary });
    } catch (err) {
      summary = { error: String(err) };
      edgeLog.error("runner failed; its leases will be rescued", { runnerId, runner: name, error: String(err) });
    } finally {
      await closePool(pool);
    }
    await writer.write(new TextEncoder().encode(`${JSON.stringify(summary)}\n`)).catch(() => {});
    await writer.close().catch(() => {});
  })();
  ctx.waitUntil(done);
  return new Response(readable, { headers: { "content-type": "application/x-ndjson" } });
}

/** Starts edge runner `runner` through the binding or URL; resolves with the held body once it answered. */
export async function startEdgeRunner(env: EdgeEnv, runner: string, invocationId: string): Promise<{ finished: Promise<string> }> {
  const init: RequestInit = {
    method: "POST",
    headers: { [SECRET_HEADER]: edgeSecret(env, "runnerSecret") ?? "", "content-type": "application/json" },
    body: JSON.stringify({ runner, invocationId }),
  };
  const service = env[EDGE_ENV.runnerService];
  const url = env[EDGE_ENV.runnerUrl];
  const response = service ? await service.fetch(`https://runner${RUN_PATH}`, init) : url ? await fetch(url, init) : null;
  if (!response) throw new Error(`neither the ${EDGE_ENV.runnerService} binding nor ${EDGE_ENV.runnerUrl} is set`);
  if (!response.ok) throw new Error(`runner answered ${response.status}: ${await response.text()}`);
  return { finished: response.text() };
}
