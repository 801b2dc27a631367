import type { z } from "zod";
import {
  DEFAULT_BACKOFF_MS,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_PRIORITY,
  DEFAULT_QUEUE,
} from "../settings/config.ts";
import type { JobDefaults, JobType, Registry } from "./job-types.ts";
import type { ServingRules } from "../settings/serving.ts";
import { checkDefinitionKeys, checkJobType } from "./validate.ts";

export type {
  AttemptOutcome,
  ConcurrencyLimit,
  Debounce,
  EnqueuedJob,
  EnqueueOptions,
  JobContext,
  JobDefaults,
  JobStatus,
  JobType,
  Registry,
  Throttle,
} from "./job-types.ts";

/**
 * Declares a job type: its name, payload schema, handler and defaults. Every
 * default is held to the bounds enqueue holds its options to; given the
 * deployment's `serving` rules (`servingRules(config)`), the queue must be
 * served and the lease must fit its runner. An option it does not know
 * (misspelt, or a feature it lacks) is refused, not ignored. A
 * ValidationError names the field.
 */
export function defineJob<S extends z.ZodType>(
  definition: { name: string; schema: S; handler: JobType<S>["handler"] } & Partial<JobDefaults> &
    Pick<JobType<S>, "concurrency" | "fair" | "debounce" | "throttle" | "rateLimit">,
  serving?: ServingRules,
): JobType<S> {
  checkDefinitionKeys(definition);
  const type: JobType<S> = {
    queue: DEFAULT_QUEUE,
    maxAttempts: DEFAULT_MAX_ATTEMPTS,
    leaseMs: DEFAULT_LEASE_MS,
    backoffMs: DEFAULT_BACKOFF_MS,
    priority: DEFAULT_PRIORITY,
    ...definition,
  };
  checkJobType(type as JobType, serving);
  return type;
}

export function createRegistry(types: readonly JobType<any>[]): Registry {
  const registry = new Map<string, JobType>();
  for (const type of types) {
    if (registry.has(type.name)) throw new Error(`job type ${type.name} is defined twice`);
    registry.set(type.name, type as JobType);
  }
  return registry;
}
