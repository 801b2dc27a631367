/**
 * The API's routes as OpenAPI definitions. Hono validates requests with the
 * same schemas the OpenAPI document is generated from, so they cannot drift.
 */
import { createRoute, z } from "@hono/zod-openapi";
import {
  batchRequestSchema, batchResponseSchema, enqueueRequestSchema, errorSchema, groupsQuerySchema, groupsSchema, idParamsSchema,
  enqueuedJobSchema, jobDetailSchema, jobPageSchema, jobSchema, listQuerySchema, queuesSchema, throughputQuerySchema, throughputSchema,
} from "./schemas.ts";

const security = [{ bearer: [] }];

const json = <S extends z.ZodType>(schema: S, description: string) => ({
  description,
  content: { "application/json": { schema } },
});
const jsonBody = <S extends z.ZodType>(schema: S) => ({ required: true, content: { "application/json": { schema } } });

const failures = {
  400: json(errorSchema, "Invalid request; `message` and `issues` name each bad field"),
  401: json(errorSchema, "Missing or wrong bearer token"),
};
const bodyFailures = {
  ...failures,
  413: json(errorSchema, "Request body larger than the limit (1 MB)"),
  415: json(errorSchema, "Body not sent as application/json"),
};
const notFound = { 404: json(errorSchema, "No job with this id") };
const conflict = { 409: json(errorSchema, "The job is not in a state that allows this; `error.status` is its status") };

export const enqueueRoute = createRoute({
  method: "post", path: "/v1/jobs", tags: ["jobs"], security,
  summary: "Enqueue a job; its payload is validated by the job type's schema",
  request: { body: jsonBody(enqueueRequestSchema) },
  responses: {
    201: json(enqueuedJobSchema, "The new job"),
    200: json(enqueuedJobSchema, "A job that stands already: the pending job of this type with the same dedupe key (nothing written), the key's unclaimed debounced job (now with this request's payload and start; `debounced`), or the job of the key's throttle window (nothing written; `throttled`)"),
    ...bodyFailures,
  },
});

export const batchRoute = createRoute({
  method: "post", path: "/v1/jobs/batch", tags: ["jobs"], security,
  summary: "Enqueue many jobs in one statement: all of them or none",
  request: { body: jsonBody(batchRequestSchema) },
  responses: { 201: json(batchResponseSchema, "Ids in request order; `existing` marks jobs that stood already (deduplicated, `debounced` or `throttled`)"), ...bodyFailures },
});

export const getJobRoute = createRoute({
  method: "get", path: "/v1/jobs/{id}", tags: ["jobs"], security,
  summary: "A job with every attempt it has made",
  request: { params: idParamsSchema },
  responses: { 200: json(jobDetailSchema, "The job"), ...failures, ...notFound },
});

export const listJobsRoute = createRoute({
  method: "get", path: "/v1/jobs", tags: ["jobs"], security,
  summary: "Jobs newest first, filtered, a page at a time (`status=dead` is the dead-jobs view)",
  request: { query: listQuerySchema },
  responses: { 200: json(jobPageSchema, "One page of jobs"), ...failures },
});

export const retryRoute = createRoute({
  method: "post", path: "/v1/jobs/{id}/retry", tags: ["jobs"], security,
  summary: "Move a dead job back to queued, with fresh attempts, to run now",
  request: { params: idParamsSchema },
  responses: { 200: json(jobSchema, "The job, queued"), ...failures, ...notFound, ...conflict },
});

export const cancelRoute = createRoute({
  method: "post", path: "/v1/jobs/{id}/cancel", tags: ["jobs"], security,
  summary: "Cancel a queued job",
  request: { params: idParamsSchema },
  responses: { 200: json(jobSchema, "The job, cancelled"), ...failures, ...notFound, ...conflict },
});

export const queuesRoute = createRoute({
  method: "get", path: "/v1/queues", tags: ["queues"], security,
  summary: "Per-queue counts (ready, unserved, delayed, running, dead) and the age of the oldest ready job",
  responses: { 200: json(queuesSchema, "One entry per queue with pending, running or dead jobs"), 401: failures[401] },
});

export const groupsRoute = createRoute({
  method: "get", path: "/v1/groups", tags: ["queues"], security,
  summary: "Per queue and group (as the fair claim shares them): ready and running jobs and the concurrency limit, busiest first; and per rate limit key: jobs waiting, starts in the window, and when a full window opens",
  request: { query: groupsQuerySchema },
  responses: { 200: json(groupsSchema, "Up to 500 groups with queued or running jobs"), ...failures },
});

export const throughputRoute = createRoute({
  method: "get", path: "/v1/throughput", tags: ["queues"], security,
  summary: "Attempts ended per minute, by outcome, over the last `minutes` minutes (1 to 60, default 15)",
  request: { query: throughputQuerySchema },
  responses: { 200: json(throughputSchema, "One bucket per minute, oldest first"), ...failures },
});

const recurringSchema = z.object({
  recurring: z.array(z.object({
    name: z.string(), jobName: z.string(), cron: z.string(), timeZone: z.string(),
    missed: z.enum(["skip", "run"]), lastTickAt: z.string().nullable(), nextRunAt: z.string().nullable(),
  })),
  jobsModule: z.string().nullable().openapi({ description: "The app's jobs module, as its config names it (`jobs`), where `recurring` is declared" }),
});

export const recurringRoute = createRoute({
  method: "get", path: "/v1/recurring", tags: ["queues"], security,
  summary: "Recurring jobs: cron, time zone, the last tick enqueued and the next run",
  responses: { 200: json(recurringSchema, "One entry per recurring job the deployment declares"), 401: failures[401] },
});

export const healthRoute = createRoute({
  method: "get", path: "/health", tags: ["service"], security: [],
  summary: "Liveness; needs no token and touches no database",
  responses: { 200: json(z.object({ ok: z.literal(true) }), "The API is up") },
});

export const openApiRoute = createRoute({
  method: "get", path: "/openapi.json", tags: ["service"], security,
  summary: "This document",
  responses: {
    200: json(z.looseObject({ openapi: z.string(), paths: z.record(z.string(), z.unknown()) }), "OpenAPI 3 document"),
    401: failures[401],
  },
});
