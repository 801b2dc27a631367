import type { Clock } from "../../shared/runner/clock.ts";

/** A clock that moves only when told: timers fire in order as `advance` passes them. */
export class ManualClock implements Clock {
  private t = 1_000_000;
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private nextId = 0;

  now(): number {
    return this.t;
  }

  after(ms: number, fn: () => void): () => void {
    const id = this.nextId++;
    this.timers.push({ at: this.t + Math.max(0, ms), fn, id });
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
}
