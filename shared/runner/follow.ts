import type { z } from "zod";
import { claimableRow, enqueue, enqueueFollowUp, insertClaimed } from "../jobs/enqueue.ts";
import { chosenFlowControl } from "../jobs/flow-control.ts";
import type { EnqueueOptions, JobContext, JobType } from "../jobs/job.ts";
import type { RunnerParts } from "./parts.ts";
import type { Store } from "../db/db.ts";
import type { Row } from "../jobs/validate.ts";
import type { ClaimedJob } from "../lifecycle/claim.ts";
import { buffered } from "./producer.ts";

/**
 * A handler's `ctx.enqueue`: follow-up jobs. One this runner can start now,
 * when nothing waits here, no suspect waits or runs, its lease fits, and no
 * job it could claim waits ahead of it in its queue, is handed off: inserted
 * already claimed by this runner (the insert is the claim) and put at the
 * head of the producer's buffer, to start as soon as a slot is free with no
 * claim round trip. Nothing waits ahead when the last claim found the queue
 * drained; when that claim filled its batch instead, the insert itself
 * looks, in the same statement, and enqueues the job plainly if one waits.
 * Any other is enqueued; one this runner serves now asks the loop for a
 * claim at once, one for later or elsewhere is told to `onFollowUp`.
 */
export function follower(r: RunnerParts): JobContext["enqueue"] {
  const { options, producer, clock } = r;
  const handOffs = new HandOffs(options.store, options.runnerId);
  return async <S extends z.ZodType>(type: JobType<S>, payload: z.input<S>, opts?: EnqueueOptions) => {
    const queue = opts?.queue ?? type.queue;
    // A debounced job starts a period from now: a follow-up for later.
    const { debounce, throttle } = chosenFlowControl(type, opts ?? {});
    const now = options.queues.includes(queue) && !opts?.runAt && !opts?.delayMs && !debounce;
    const maxLeaseMs = r.maxLeaseMs();
    if (now && !opts?.dedupeKey && !throttle && producer.buffered === 0 && !r.isolation.active &&
        options.registry.has(type.name) && type.leaseMs <= maxLeaseMs && !type.concurrency && !type.rateLimit /* only the claim admits these */) {
      const sentAt = clock.now();
      const spec = { type, payload, options: opts };
      // The last claim found the queue drained: handed off. It filled its
      // batch: the insert itself looks for a job this runner could claim
      // ahead of it, and enqueues it plainly if one waits.
      const written = producer.drained
        ? { claimed: await handOffs.write(claimableRow(spec, options.limits)) }
        : await enqueueFollowUp(options.store, spec, options.runnerId, { names: [...options.registry.keys()], maxLeaseMs }, options.limits);
      if ("claimed" in written) {
        r.tally.claimed(1);
        producer.handOff(buffered(written.claimed, sentAt));
        r.slots.pump();
        return { id: written.claimed.id, existing: false };
      }
      r.waiter.request();
      return written.queued;
    }
    const result = await enqueue(options.store, type, payload, opts, options.limits);
    if (now) r.waiter.request();
    else options.onFollowUp?.();
    return result;
  };
}

/**
 * The hand-offs' writes. While one is on its way, the hand-offs asked for
 * meanwhile wait, and go together in the next statement: handlers that
 * finish together (the steps of many workflows) would otherwise each wait
 * for one of the runner's few connections, behind each other, for a round
 * trip each. The first goes at once; a failed statement fails the handlers
 * whose jobs it carried, as each one's own would have.
 */
class HandOffs {
  private waiting: { row: Row; done: (claimed: Promise<ClaimedJob>) => void }[] = [];
  private writing = false;

  constructor(private readonly store: Store, private readonly runnerId: string) {}

  write(row: Row): Promise<ClaimedJob> {
    return new Promise<ClaimedJob>((resolve) => {
      this.waiting.push({ row, done: resolve });
      if (!this.writing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.writing = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0);
      const written = insertClaimed(this.store, batch.map((w) => w.row), this.runnerId);
      batch.forEach((w, i) => w.done(written.then((claimed) => claimed[i]!)));
      await written.catch(() => {});
    }
    this.writing = false;
  }
}
