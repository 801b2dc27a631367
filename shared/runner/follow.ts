import type { z } from "zod";
import { enqueue, enqueueClaimed } from "../jobs/enqueue.ts";
import { chosenFlowControl } from "../jobs/flow-control.ts";
import type { EnqueueOptions, JobContext, JobType } from "../jobs/job.ts";
import type { RunnerParts } from "./parts.ts";
import { buffered } from "./producer.ts";

/**
 * A handler's `ctx.enqueue`: follow-up jobs. One this runner can start now,
 * when nothing waits here, the queue is drained, no suspect waits or runs,
 * and its lease fits, is handed off: inserted already claimed by this runner
 * (the insert is the claim) and put at the head of the producer's buffer, to
 * start as soon as a slot is free with no claim round trip. Any other is
 * enqueued; one this runner serves now asks the loop for a claim at once,
 * one for later or elsewhere is told to `onFollowUp`.
 */
export function follower(r: RunnerParts): JobContext["enqueue"] {
  const { options, producer, clock } = r;
  return async <S extends z.ZodType>(type: JobType<S>, payload: z.input<S>, opts?: EnqueueOptions) => {
    const queue = opts?.queue ?? type.queue;
    // A debounced job starts a period from now: a follow-up for later.
    const { debounce, throttle } = chosenFlowControl(type, opts ?? {});
    const now = options.queues.includes(queue) && !opts?.runAt && !opts?.delayMs && !debounce;
    if (now && !opts?.dedupeKey && !throttle && producer.drained && producer.buffered === 0 && !r.isolation.active &&
        options.registry.has(type.name) && type.leaseMs <= r.maxLeaseMs() && !type.concurrency && !type.rateLimit /* only the claim admits these */) {
      const sentAt = clock.now();
      const job = await enqueueClaimed(options.store, { type, payload, options: opts }, options.runnerId, options.limits);
      r.tally.claimed(1);
      producer.handOff(buffered(job, sentAt));
      r.slots.pump();
      return { id: job.id, existing: false };
    }
    const result = await enqueue(options.store, type, payload, opts, options.limits);
    if (now) r.waiter.request();
    else options.onFollowUp?.();
    return result;
  };
}
