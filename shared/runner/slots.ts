import type { Completer } from "./completer.ts";
import type { Buffered, Producer } from "./producer.ts";

export interface SlotsOptions {
  /** Jobs run at once. */
  size: number;
  producer: Producer;
  completer: Completer;
  /** The longest lease the runner can still take: nothing starts once it is gone. */
  maxLeaseMs: () => number;
  /** Runs one buffered job to its handed-in outcome (runner/run-job.ts). */
  run: (b: Buffered) => Promise<void>;
  /** A slot's run threw: its lease is left for the rescuer. */
  onError: (b: Buffered, err: unknown) => void;
  /** A slot is free again. */
  onFreed: () => void;
}

/**
 * The slots own starting jobs: the pump starts buffered jobs while slots
 * are free and time is left, unless outcomes are piling up unwritten (the
 * database is not answering: the completer is unhealthy with a slot's worth
 * of backlog), and starts again as each job ends or each outcome is written.
 */
export class Slots {
  private readonly running = new Set<Promise<void>>();
  private stopped = false;

  constructor(private readonly o: SlotsOptions) {}

  /** Jobs running now. */
  get busy(): number {
    return this.running.size;
  }

  get size(): number {
    return this.o.size;
  }

  /** Starts buffered jobs while the rule above allows. */
  pump(): void {
    const { producer, completer } = this.o;
    while (!this.stopped && this.running.size < this.o.size && producer.buffered > 0 && this.o.maxLeaseMs() > 0 &&
           !(completer.unhealthy() && completer.backlog() >= this.o.size)) {
      const b = producer.next()!;
      const p: Promise<void> = this.o.run(b).then(
        () => this.freed(p),
        (err) => {
          this.o.onError(b, err);
          this.freed(p);
        },
      );
      this.running.add(p);
    }
  }

  /** Resolves when the jobs running now have ended. */
  async settle(): Promise<void> {
    await Promise.all(this.running);
  }

  /** Starts nothing more. */
  stop(): void {
    this.stopped = true;
  }

  /** Resolves when every running job has ended, those started meanwhile too. */
  async ended(): Promise<void> {
    while (this.running.size > 0) await Promise.race(this.running);
  }

  private freed(p: Promise<void>): void {
    this.running.delete(p);
    this.pump();
    this.o.onFreed();
  }
}
