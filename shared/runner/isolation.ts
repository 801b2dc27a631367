import type { Completer } from "./completer.ts";
import type { Producer } from "./producer.ts";
import type { Slots } from "./slots.ts";
import type { Tally } from "./tally.ts";

/**
 * Suspects (jobs whose runner died holding them on their next-to-last
 * attempt) run alone. Isolation owns that rule: once a claim says, or a look
 * finds, that suspects wait, the runner stops claiming other work and hands
 * off no follow-up; when what it holds has finished it runs suspects one at
 * a time with nothing beside them, until none is left.
 */
export class Isolation {
  private on = false;

  constructor(private readonly o: { producer: Producer; completer: Completer; slots: Slots; tally: Tally; maxLeaseMs: () => number }) {}

  /** Suspects wait or run: claim nothing else, hand nothing off. */
  get active(): boolean {
    return this.on;
  }

  /**
   * Once the slots and buffer are empty, runs one suspect alone to its
   * written outcome. True if one ran; false (and isolation ends) if none was
   * left to claim, or false while the runner still holds other work.
   */
  async runAlone(): Promise<boolean> {
    const { producer, completer, slots, tally, maxLeaseMs } = this.o;
    if (!this.on || slots.busy > 0 || producer.buffered > 0) return false;
    const claimed = (await producer.claim(1, maxLeaseMs(), true)).length;
    tally.claimed(claimed);
    if (claimed === 0) return (this.on = false);
    slots.pump();
    await slots.settle();
    await completer.drain();
    this.on = await producer.suspectWaiting(maxLeaseMs(), true);
    return true;
  }

  /** After a claim: whether suspects wait (from the claim's answer, or a look at most every second); if so, isolation begins. */
  async begins(): Promise<boolean> {
    if (this.on || !(await this.o.producer.suspectWaiting(this.o.maxLeaseMs()))) return false;
    return (this.on = true);
  }
}
