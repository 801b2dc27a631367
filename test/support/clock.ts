import { systemClock, type Clock } from "../../shared/runner/clock.ts";
import type { Queryable, Store } from "../../shared/db/db.ts";

/**
 * A clock that moves only when told: timers fire in order as `advance` passes them.
 * It starts at `startMs` (an epoch time such as `Date.now()` when the times it
 * writes are read beside the database's).
 */
export class ManualClock implements Clock {
  private t: number;
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private nextId = 0;
  private onTimer: (() => void)[] = [];

  constructor(startMs = 1_000_000) {
    this.t = startMs;
  }

  now(): number {
    return this.t;
  }

  /** Resolves once a timer is pending (at once if one is): the code under test has reached its wait. An event, not a time. */
  timerSet(): Promise<void> {
    return this.timers.length > 0 ? Promise.resolve() : new Promise((r) => this.onTimer.push(r));
  }

  after(ms: number, fn: () => void): () => void {
    const id = this.nextId++;
    this.timers.push({ at: this.t + Math.max(0, ms), fn, id });
    for (const r of this.onTimer.splice(0)) r();
    return () => {
      this.timers = this.timers.filter((timer) => timer.id !== id);
    };
  }

  /** Moves time forward by `ms`, firing each timer due on the way (letting promises settle between). */
  async advance(ms: number): Promise<void> {
    const until = this.t + ms;
    for (;;) {
      // Let what the last timer set going run first: it may set new timers.
      await new Promise((r) => setImmediate(r));
      this.timers.sort((a, b) => a.at - b.at || a.id - b.id);
      const next = this.timers[0];
      if (!next || next.at > until) break;
      this.timers.shift();
      this.t = next.at;
      next.fn();
    }
    this.t = until;
  }

  pending(): number {
    return this.timers.length;
  }

  /** How long until the earliest pending timer is due, or null when none is. */
  dueIn(): number | null {
    return this.timers.length === 0 ? null : Math.min(...this.timers.map((timer) => timer.at)) - this.t;
  }
}

/**
 * The system clock, with timers a test can bring forward: `fastForward(ms)`
 * fires at once every pending timer due within `ms` (in order) and brings
 * the others `ms` closer, as if `ms` had passed with nothing else happening.
 * `now()` stays the system's, the clock the functions' processes write their
 * times in, so a timer set after a fast-forward keeps its true delay. (A
 * recurring timer brought forward fires once for the skipped span, not once
 * per interval in it.) The test moves what the database holds for the same
 * span itself.
 */
export class FastForwardClock implements Clock {
  private readonly timers = new Map<number, { dueMs: number; fn: () => void; timer: ReturnType<typeof setTimeout> }>();
  private nextId = 0;

  now(): number {
    return Date.now();
  }

  after(ms: number, fn: () => void): () => void {
    const id = this.nextId++;
    this.set(id, Date.now() + Math.max(0, ms), fn);
    return () => {
      clearTimeout(this.timers.get(id)?.timer);
      this.timers.delete(id);
    };
  }

  fastForward(ms: number): void {
    const pending = [...this.timers].sort(([a, x], [b, y]) => x.dueMs - y.dueMs || a - b);
    for (const [id, { dueMs, fn, timer }] of pending) {
      clearTimeout(timer);
      this.set(id, dueMs - ms, fn);
    }
  }

  /** When the pending timers are due (epoch ms), earliest first. */
  pending(): number[] {
    return [...this.timers.values()].map((t) => t.dueMs).sort((a, b) => a - b);
  }

  private set(id: number, dueMs: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(id);
      fn();
    }, Math.max(0, dueMs - Date.now()));
    timer.unref?.();
    this.timers.set(id, { dueMs, fn, timer });
  }
}

/**
 * A store whose queries are counted while in flight: what tells a
 * `ManualClock` driver that the code under test is waiting on the database,
 * not on the clock (a round trip ends in its own time; the clock must not
 * move past a timer the code will set when it does).
 */
export function watched<S extends Store>(store: S): S & { busy(): boolean; quiet(): Promise<void> } {
  let inFlight = 0;
  let waiters: (() => void)[] = [];
  const done = () => {
    if (--inFlight === 0) for (const w of waiters.splice(0)) w();
  };
  const db: Queryable = {
    query(text, values) {
      inFlight++;
      const p = store.db.query(text, values);
      p.then(done, done);
      return p;
    },
  } as Queryable;
  return {
    ...store, db,
    busy: () => inFlight > 0,
    quiet: () => (inFlight === 0 ? Promise.resolve() : new Promise<void>((r) => waiters.push(r))),
  };
}

/** Turns of the event loop with nothing in flight before the code under test counts as waiting on the clock. */
const CALM_TURNS = 10;

/**
 * Runs `work` (code under test on `clock`) to its end, moving the clock only
 * when the code waits on nothing but it: each time no query of `store` has
 * been in flight for some turns of the event loop, time jumps to the next
 * timer and fires it. With no timer pending it waits for one to be set (or
 * for `work` to end). An event, never a time: however loaded the host, a
 * timer fires only once the round trips before it are answered. `moved` is
 * awaited before each jump, with its length: where the test moves what the
 * database holds (its leases) in step, or looks at it while the code waits.
 */
export async function runOn<T>(
  clock: ManualClock,
  store: { busy(): boolean; quiet(): Promise<void> },
  work: Promise<T>,
  moved?: (ms: number) => Promise<unknown>,
): Promise<T> {
  let ended = false;
  const end = work.then(() => void (ended = true), () => void (ended = true));
  for (;;) {
    for (let calm = 0; calm < CALM_TURNS && !ended; calm++) {
      if (store.busy()) {
        calm = -1;
        await Promise.race([store.quiet(), end]);
        continue;
      }
      await new Promise((r) => setImmediate(r));
    }
    if (ended) return work;
    const due = clock.dueIn();
    if (due === null) {
      await Promise.race([clock.timerSet(), end]);
      continue;
    }
    if (moved && due > 0) await moved(due);
    await clock.advance(due);
  }
}

/**
 * The system clock read `shiftMs` later, its timers the system's: a runner's
 * view of a later time, beside a database whose stored times were moved back
 * by as much (the time "passed" with no one waiting for it).
 */
export const laterClock = (shiftMs: number): Clock => ({ now: () => systemClock.now() + shiftMs, after: systemClock.after });
