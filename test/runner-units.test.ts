import { describe, expect, it } from "vitest";
import { Completer, type Held, type SettleReport } from "../shared/runner/completer.ts";
import { MAX_OUTAGE_MS, Producer, SUSPECT_CHECK_MS, type ProducerOptions } from "../shared/runner/producer.ts";
import { ManualClock } from "./support/clock.ts";
import { connectionLost, MemoryDb, type Sent } from "./support/memory-db.ts";

/**
 * The producer and the completer on their own, on a manual clock and an
 * in-memory database answerer (test/support/memory-db.ts): deadlines,
 * backoff, batching and buffer renewal, with no Postgres and no sleeping.
 */

/** Lets queued callbacks and promise chains run (the completer gathers a batch over one turn). */
const turns = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};
/** A promise's outcome, without an unhandled rejection while it is pending. */
const outcome = <T>(p: Promise<T>) => {
  const box: { done?: boolean; value?: T; error?: unknown } = {};
  p.then((value) => Object.assign(box, { done: true, value }), (error) => Object.assign(box, { done: true, error }));
  return box;
};
const gaps = (sent: Sent[]) => sent.slice(1).map((s, i) => s.at - sent[i]!.at);

describe("the producer", () => {
  const setup = (o: Partial<ProducerOptions> = {}) => {
    const clock = new ManualClock();
    const db = new MemoryDb(clock);
    const producer = new Producer({
      store: { db, schema: "leasehold" }, clock, queues: ["q"], names: ["t"], runnerId: "r", until: () => Number.POSITIVE_INFINITY, ...o,
    });
    return { clock, db, producer };
  };

  it("claims a batch into its buffer in one statement, says when the queue ran dry, and starts a handed-off job first", async () => {
    const { clock, db, producer } = setup();
    const ids = db.add(5, { leaseMs: 4_000 });
    expect((await producer.claim(3, 60_000)).map((j) => j.id)).toEqual(ids.slice(0, 3));
    expect([producer.buffered, producer.drained, db.of("claim").length]).toEqual([3, false, 1]);
    expect((await producer.claim(3, 60_000)).length).toBe(2);
    expect([producer.buffered, producer.drained]).toEqual([5, true]);
    // Each buffered job's deadline is its lease from when the claim was sent.
    const first = producer.next()!;
    expect([first.job.id, first.deadline]).toEqual([ids[0], clock.now() + 4_000]);
    producer.handOff({ job: { ...first.job, id: "handed" }, deadline: clock.now() + 1_000 });
    expect(producer.next()!.job.id).toBe("handed");
    expect(producer.takeAll().map((b) => b.job.id)).toEqual(ids.slice(1));
    expect(producer.buffered).toBe(0);
  });

  it("starts a buffered job as it is until it has waited out its settle margin, then renews it to a full lease or gives it up", async () => {
    const { clock, db, producer } = setup();
    db.add(1, { leaseMs: 8_000 });
    await producer.claim(1, 60_000);
    const b = producer.next()!;
    // An 8 s lease keeps 2 s for the settle: a job that waited up to 2 s still gets the whole of its 6 s.
    await clock.advance(2_000);
    expect(producer.fresh(b)).toBe(b.deadline);
    await clock.advance(1);
    expect(producer.fresh(b)).toBeUndefined();
    // Renewed to the whole lease from the renewal's send, in the database too.
    await clock.advance(999);
    expect(await producer.renew(b, 60_000)).toBe(clock.now() + 8_000);
    expect(db.jobs.get(b.job.id)!.leaseEndsAt).toBe(clock.now() + 8_000);
    // No renewal the runner's time left cannot cover: not even asked.
    expect(await producer.renew(b, 7_999)).toBeNull();
    expect(db.of("extend").length).toBe(1);
    // A lease that ran out meanwhile cannot be renewed: the job is given back.
    await clock.advance(8_000);
    expect(await producer.renew(b, 60_000)).toBeNull();
  });

  it("lets a job of a 1 s lease wait a quarter of it in the buffer, not its 400 ms settle margin, so it keeps 350 ms to run", async () => {
    const { clock, db, producer } = setup();
    db.add(1, { leaseMs: 1_000 });
    await producer.claim(1, 60_000);
    const b = producer.next()!;
    await clock.advance(250);
    expect(producer.fresh(b)).toBe(b.deadline);
    await clock.advance(1);
    expect(producer.fresh(b)).toBeUndefined();
  });

  it("retries a claim on a lost connection with growing waits on its clock", async () => {
    const retries: number[] = [];
    const { clock, db, producer } = setup({ onRetry: (_e, _n, waitMs) => retries.push(waitMs) });
    db.add(1);
    let failing = 3;
    db.before = () => {
      if (failing-- > 0) throw connectionLost();
    };
    const claimed = outcome(producer.claim(1, 60_000));
    await clock.advance(0);
    expect(db.of("claim").length).toBe(1);
    await clock.advance(24);
    // Backoff from 50 ms with jitter: the first wait is at least 25 ms.
    expect(db.of("claim").length).toBe(1);
    await clock.advance(1_000);
    expect(claimed.value?.length).toBe(1);
    const [a, b, c] = gaps(db.of("claim"));
    expect(a).toBeGreaterThanOrEqual(25);
    expect(a).toBeLessThanOrEqual(50);
    expect(b).toBeGreaterThanOrEqual(50);
    expect(b).toBeLessThanOrEqual(100);
    expect(c).toBeGreaterThanOrEqual(100);
    expect(c).toBeLessThanOrEqual(200);
    expect(retries).toEqual([a, b, c]);
  });

  it("gives up on a database that does not answer at its deadline, or after MAX_OUTAGE_MS", async () => {
    const start = new ManualClock().now();
    const { clock, db, producer } = setup({ until: () => start + 500 });
    db.before = () => {
      throw connectionLost();
    };
    const claimed = outcome(producer.claim(1, 60_000));
    await clock.advance(2_000);
    expect(claimed.error).toMatchObject({ code: "ECONNRESET" });
    // Every try started before the deadline; the last stopped there, not after.
    const tries = db.of("claim");
    expect(tries.at(-1)!.at).toBeLessThan(start + 500);
    expect(tries.at(-1)!.at).toBeGreaterThan(start + 500 - 2_000);

    const unbounded = setup();
    unbounded.db.before = db.before;
    const never = outcome(unbounded.producer.claim(1, 60_000));
    await unbounded.clock.advance(MAX_OUTAGE_MS - 2_000);
    expect(never.done).toBeUndefined();
    await unbounded.clock.advance(2_000);
    expect(never.error).toMatchObject({ code: "ECONNRESET" });
    expect(unbounded.db.of("claim").at(-1)!.at).toBeLessThan(start + MAX_OUTAGE_MS);
  });

  it("looks for suspects at most once a second, and not at all while its claims answer that", async () => {
    const { clock, db, producer } = setup();
    expect(await producer.suspectWaiting(60_000)).toBe(false);
    expect(await producer.suspectWaiting(60_000)).toBe(false);
    expect(db.of("suspectWaiting").length).toBe(1);
    await clock.advance(SUSPECT_CHECK_MS);
    await producer.suspectWaiting(60_000);
    expect(db.of("suspectWaiting").length).toBe(2);
    await producer.suspectWaiting(60_000, true);
    expect(db.of("suspectWaiting").length).toBe(3);
    // A claim that brought jobs said none wait: no look of its own for a second.
    db.add(1);
    await clock.advance(SUSPECT_CHECK_MS);
    await producer.claim(1, 60_000);
    await producer.suspectWaiting(60_000);
    expect(db.of("suspectWaiting").length).toBe(3);
  });
});

describe("the completer", () => {
  const setup = (o: { maxBatch?: number } = {}) => {
    const clock = new ManualClock();
    const db = new MemoryDb(clock);
    const reports: SettleReport[] = [];
    const errors: boolean[] = [];
    // random 1: no jitter, each backoff its ceiling.
    const completer = new Completer({
      store: { db, schema: "leasehold" }, clock, random: () => 1, onSettled: (r) => void reports.push(r),
      onWriteError: (_e, transient) => void errors.push(transient), ...o,
    });
    /** Jobs held by this runner, leased for `leaseMs` from now. */
    const held = (n: number, leaseMs = 10_000): Held[] =>
      db.add(n, { status: "running", attempts: 1, runs: 1, leaseMs, leaseEndsAt: clock.now() + leaseMs }).map((id) => {
        const job = db.jobs.get(id)!;
        job.token = `00000000-0000-0000-0000-${id.padStart(12, "0")}`;
        return { id, leaseToken: job.token, deadline: clock.now() + leaseMs };
      });
    const settles = () => db.of("settle").map((s) => s.parts);
    return { clock, db, completer, reports, errors, held, settles };
  };

  it("writes what arrives in one turn in one statement, and what arrives during a write in the next", async () => {
    const { db, completer, reports, held, settles } = setup();
    const [a, b, c, d, e] = held(5);
    completer.succeed(a!);
    completer.succeed(b!);
    let open!: () => void;
    db.before = (s) => (s.kind === "settle" ? new Promise<void>((r) => (open = r)) : undefined);
    await turns();
    expect(settles()).toEqual([{ succeeded: [a!.id, b!.id] }]);
    // The write is in flight: these wait and go together.
    completer.succeed(c!);
    completer.fail({ ...d!, outcome: "failed", error: "boom", permanent: false, retryDelayMs: 0 });
    completer.release(e!);
    await turns();
    expect(settles().length).toBe(1);
    expect(completer.backlog()).toBe(3);
    db.before = undefined;
    open();
    await completer.drain();
    expect(settles()).toEqual([{ succeeded: [a!.id, b!.id] }, { succeeded: [c!.id], failed: [d!.id], released: [e!.id] }]);
    expect(reports.map((r) => [r.lease.id, r.kind, r.accepted, r.status])).toEqual([
      [a!.id, "succeeded", true, undefined], [b!.id, "succeeded", true, undefined],
      [c!.id, "succeeded", true, undefined], [d!.id, "failed", true, "queued"], [e!.id, "released", true, undefined],
    ]);
    expect(completer.backlog()).toBe(0);
  });

  it("writes at most maxBatch outcomes of a kind in one statement", async () => {
    const { completer, held, settles } = setup({ maxBatch: 2 });
    for (const l of held(5)) completer.succeed(l);
    await completer.drain();
    expect(settles().map((p) => p!.succeeded!.length)).toEqual([2, 2, 1]);
  });

  it("writes no start mark for a job that ends in the same write, and tells its waiter it is recorded", async () => {
    const { completer, held, settles } = setup();
    const [a, b] = held(2);
    const started = completer.recordStart(a!);
    completer.succeed(a!);
    completer.markStarted(b!);
    expect(await started).toBe(true);
    await completer.drain();
    expect(settles()).toEqual([{ started: [b!.id], succeeded: [a!.id] }]);
  });

  it("retries a failed write with exponential backoff capped at a second, unhealthy until one lands", async () => {
    const { clock, db, completer, reports, errors, held } = setup();
    const [a] = held(1, 60_000);
    let failing = 8;
    db.before = (s) => {
      if (s.kind === "settle" && failing-- > 0) throw connectionLost();
    };
    completer.succeed(a!);
    await turns();
    expect([db.of("settle").length, completer.unhealthy(), completer.backlog()]).toEqual([1, true, 1]);
    await clock.advance(49);
    expect(db.of("settle").length).toBe(1);
    await clock.advance(1);
    expect(db.of("settle").length).toBe(2);
    await clock.advance(5_000);
    await completer.drain();
    // 50, 100, 200, 400, 800 ms, then the 1 s cap.
    expect(gaps(db.of("settle"))).toEqual([50, 100, 200, 400, 800, 1_000, 1_000, 1_000]);
    expect(errors).toEqual(Array(8).fill(true));
    expect([completer.unhealthy(), completer.backlog()]).toEqual([false, 0]);
    expect(reports.map((r) => [r.kind, r.accepted])).toEqual([["succeeded", true]]);
  });

  it("abandons an outcome whose lease ran out while the database was away, and writes it no more", async () => {
    const { clock, db, completer, reports, held } = setup();
    const [a] = held(1, 300);
    db.before = (s) => {
      if (s.kind === "settle") throw connectionLost();
    };
    completer.succeed(a!);
    const drained = outcome(completer.drain());
    await clock.advance(299);
    expect(reports).toEqual([]);
    const tries = db.of("settle").length;
    await clock.advance(1_000);
    expect(reports).toEqual([{ lease: a, kind: "succeeded", accepted: false, abandoned: true }]);
    // The try in flight at the deadline was the last.
    expect(db.of("settle").length).toBeLessThanOrEqual(tries + 1);
    expect(db.of("settle").every((s) => s.at < a!.deadline)).toBe(true);
    await turns();
    expect(drained.done).toBe(true);
  });

  it("after a write whose answer was lost, reports what it had applied instead of writing it again", async () => {
    const { clock, db, completer, reports, held } = setup();
    const [a] = held(1);
    let lose = true;
    db.after = (s) => {
      if (s.kind === "settle" && lose) {
        lose = false;
        throw connectionLost();
      }
    };
    completer.succeed(a!);
    await turns();
    await clock.advance(50);
    await completer.drain();
    expect(db.sent.map((s) => s.kind)).toEqual(["settle", "settledEarlier"]);
    expect(reports).toEqual([{ lease: a, kind: "succeeded", accepted: true, status: undefined }]);
    expect(db.jobs.get(a!.id)!.status).toBe("succeeded");
  });
});
