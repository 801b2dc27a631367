/** The `/v1/jobs` handlers: enqueue (one or a batch), get, list, retry, cancel. */
import type { OpenAPIHono } from "@hono/zod-openapi";
import { cancelJob, retryJob } from "../../shared/lifecycle/manual.ts";
import { getJob, listJobs, type JobDetail, type JobRecord } from "../../shared/observe/admin.ts";
import type { Store } from "../../shared/db/db.ts";
import { enqueueJobs, type EnqueueLimits, type JobSpec } from "../../shared/jobs/enqueue.ts";
import { ValidationError } from "../../shared/errors.ts";
import type { EnqueueOptions, JobStatus, Registry } from "../../shared/jobs/job.ts";
import type { Waker } from "../../shared/scheduler/wake.ts";
import { ApiError, refusedPayload, unknownJobType } from "./errors.ts";
import { batchRoute, cancelRoute, enqueueRoute, getJobRoute, listJobsRoute, retryRoute } from "./routes.ts";
import { toAttemptJson, toJobJson, toStepJson, type EnqueueRequest } from "./schemas.ts";

export type ApiEnv = { Variables: { store: Store; requestId: string } };

/** An API request as the core's `JobSpec`: the job type looked up by name, times made absolute. */
function toSpec(registry: Registry, request: EnqueueRequest, at: (string | number)[]): JobSpec {
  const { name, payload, runAt, delaySeconds, ...rest } = request;
  const type = registry.get(name);
  if (!type) throw unknownJobType(name, [...at, "name"]);
  const options: EnqueueOptions = { ...rest };
  if (runAt !== undefined) options.runAt = new Date(runAt);
  if (delaySeconds !== undefined) options.delayMs = Math.round(delaySeconds * 1000);
  return { type, payload, options };
}

/** Enqueues, with every issue's path naming the field in the request body. */
async function enqueueAll(store: Store, specs: JobSpec[], batch: boolean, limits: EnqueueLimits) {
  try {
    return await enqueueJobs(store, specs, limits);
  } catch (err) {
    // The core leaves the `jobs.<i>` prefix off when it is given one job.
    if (err instanceof ValidationError && batch && specs.length === 1) {
      throw new ValidationError(err.message, err.issues.map((i) => ({ ...i, path: ["jobs", 0, ...i.path] })));
    }
    throw refusedPayload(err, batch ? (specs.length === 1 ? ["jobs", 0, "payload"] : ["jobs"]) : ["payload"]) ?? err;
  }
}

async function mustGet(store: Store, id: string) {
  const job = await getJob(store, id);
  if (!job) throw new ApiError(404, "not_found", `job ${id} does not exist`);
  return job;
}

/** Why a guarded state change changed nothing: the job is missing (404) or in another state (409). */
async function refusal(store: Store, id: string, needed: JobStatus, action: string): Promise<ApiError> {
  const { status } = await mustGet(store, id);
  return new ApiError(409, "conflict", `job ${id} is ${status}; only a ${needed} job can be ${action}`, { status });
}

const withoutAttempts = ({ attemptHistory: _, result: __, steps: ___, ...job }: JobDetail): JobRecord => job;

/** `limits`: the deployment's serving rules and payload size limit, which every enqueue is held to. */
export function registerJobRoutes(app: OpenAPIHono<ApiEnv>, registry: Registry, waker: Waker | undefined, limits: EnqueueLimits) {
  app.openapi(enqueueRoute, async (c) => {
    const store = c.var.store;
    const [result] = await enqueueAll(store, [toSpec(registry, c.req.valid("json"), [])], false, limits);
    // A debounced job's start only moved later: whoever watches its earlier start re-plans then.
    if (!result!.existing) waker?.wake();
    const { debounced, throttled } = result!;
    const job = { ...toJobJson(withoutAttempts(await mustGet(store, result!.id))), ...(debounced && { debounced }), ...(throttled && { throttled }) };
    return result!.existing ? c.json(job, 200) : c.json(job, 201);
  });

  app.openapi(batchRoute, async (c) => {
    const specs = c.req.valid("json").jobs.map((request, i) => toSpec(registry, request, ["jobs", i]));
    const results = await enqueueAll(c.var.store, specs, true, limits);
    if (results.some((r) => !r.existing)) waker?.wake();
    return c.json({ jobs: results.map(({ id, existing, debounced, throttled }) => ({ id, existing, ...(debounced && { debounced }), ...(throttled && { throttled }) })) }, 201);
  });

  app.openapi(getJobRoute, async (c) => {
    const { attemptHistory, result, steps, ...job } = await mustGet(c.var.store, c.req.valid("param").id);
    return c.json({ ...toJobJson(job), result, attemptHistory: attemptHistory.map(toAttemptJson), steps: steps.map(toStepJson) }, 200);
  });

  app.openapi(listJobsRoute, async (c) => {
    const page = await listJobs(c.var.store, c.req.valid("query"));
    return c.json({ jobs: page.jobs.map(toJobJson), nextCursor: page.nextCursor }, 200);
  });

  app.openapi(retryRoute, async (c) => {
    const { id } = c.req.valid("param");
    const job = await retryJob(c.var.store, id);
    if (!job) throw await refusal(c.var.store, id, "dead", "retried");
    waker?.wake();
    return c.json(toJobJson(job), 200);
  });

  app.openapi(cancelRoute, async (c) => {
    const { id } = c.req.valid("param");
    const job = await cancelJob(c.var.store, id);
    if (!job) throw await refusal(c.var.store, id, "queued", "cancelled");
    return c.json(toJobJson(job), 200);
  });
}
