import { connect, createServer, type Socket } from "node:net";

/**
 * A TCP proxy on 127.0.0.1 in front of a Postgres that breaks the network on
 * command, the way Lambda-to-Neon networks break: connections cut (both ends
 * see a reset), connections that go silent (bytes swallowed, sockets left
 * open, no error on either side), and whole-network pauses.
 *
 * Bounded: at most `maxConnections` live pairs, at most `maxHeldBytes` held
 * per direction while paused (the pair is cut beyond that), loopback only.
 * `close()` destroys every pair and stops the server and its timers.
 */

export interface FaultProxyCounters {
  /** Connections accepted (pairs opened). */
  accepted: number;
  /** Connections refused because `maxConnections` pairs were live. */
  refused: number;
  /** Pairs live now. */
  live: number;
  /** Pairs destroyed by a cut (`cutAll`, `cutEvery`). */
  cut: number;
  /** Cut events, each cutting every live pair. */
  cutEvents: number;
  /** Pairs chosen by `stallFraction` that have gone silent. */
  stalled: number;
  bytesForwarded: number;
  /** Bytes dropped by silent pairs. */
  bytesSwallowed: number;
}

export interface FaultProxy {
  host: "127.0.0.1";
  port: number;
  counters: FaultProxyCounters;
  /** Destroys every live pair now; returns how many. */
  cutAll(): number;
  /** Cuts every live pair at random intervals between minMs and maxMs, until `stopCutting()`. */
  cutEvery(minMs: number, maxMs: number): void;
  stopCutting(): void;
  /**
   * A fraction `f` of NEW connections goes silent after the Postgres startup
   * (the server's first ReadyForQuery), or `afterBytes` bytes after it: from
   * then on nothing is forwarded either way and nothing is closed. Exactly
   * f of them, spread evenly from the first: connections 0, 1/f, 2/f ...
   */
  stallFraction(f: number, options?: { afterBytes?: number }): void;
  /** Holds every byte of every pair (live and new), and a server's hang-up behind them, until `resume()`, which delivers them in order. */
  stallAll(): void;
  resume(): void;
  close(): Promise<void>;
}

export interface FaultProxyOptions {
  target: { host: string; port: number };
  maxConnections?: number;
  maxHeldBytes?: number;
}

/** One direction of a pair: forwards, holds while paused, or swallows once silent. */
class Lane {
  held: Buffer[] = [];
  heldBytes = 0;
  constructor(readonly to: Socket) {}
}

interface Pair {
  client: Socket;
  upstream: Socket;
  up: Lane;
  down: Lane;
  /** Chosen to go silent; `silentAfter` bytes after startup, then silent. */
  doomed: boolean;
  silentAfter: number;
  silent: boolean;
  started: boolean;
  /** Server bytes parsed so far while looking for the first ReadyForQuery. */
  startup: Buffer;
  bytesAfterStartup: number;
  /** The server hung up while bytes to the client were held: the client sees the end after them. */
  hungUp?: boolean;
}

/** Whether the server's startup reply (type byte + int32 length messages) has reached ReadyForQuery ('Z'). */
function startupDone(buf: Buffer): { done: boolean; rest: Buffer } {
  let at = 0;
  while (buf.length - at >= 5) {
    const type = buf[at]!;
    const length = buf.readInt32BE(at + 1);
    if (buf.length - at < 1 + length) break;
    at += 1 + length;
    if (type === 0x5a) return { done: true, rest: buf.subarray(at) };
  }
  return { done: false, rest: buf.subarray(at) };
}

export function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const maxConnections = options.maxConnections ?? 400;
  const maxHeldBytes = options.maxHeldBytes ?? 16 * 2 ** 20;
  const counters: FaultProxyCounters = {
    accepted: 0, refused: 0, live: 0, cut: 0, cutEvents: 0, stalled: 0, bytesForwarded: 0, bytesSwallowed: 0,
  };
  const pairs = new Set<Pair>();
  let stallF = 0;
  let stallAfterBytes = 0;
  let stallCount = 0;
  let paused = false;
  let cutTimer: NodeJS.Timeout | null = null;

  const destroy = (p: Pair) => {
    if (!pairs.delete(p)) return;
    counters.live--;
    p.client.destroy();
    p.upstream.destroy();
  };

  const forward = (p: Pair, lane: Lane, chunk: Buffer) => {
    if (p.silent) {
      counters.bytesSwallowed += chunk.length;
      return;
    }
    if (paused) {
      lane.held.push(chunk);
      lane.heldBytes += chunk.length;
      if (lane.heldBytes > maxHeldBytes) destroy(p);
      return;
    }
    counters.bytesForwarded += chunk.length;
    lane.to.write(chunk);
  };

  // Counts bytes after startup for a doomed pair; returns the part still to forward.
  const beforeSilence = (p: Pair, chunk: Buffer): Buffer => {
    if (!p.doomed || !p.started || p.silent) return chunk;
    const room = p.silentAfter - p.bytesAfterStartup;
    if (room >= chunk.length) {
      p.bytesAfterStartup += chunk.length;
      return chunk;
    }
    p.silent = true;
    counters.stalled++;
    counters.bytesSwallowed += chunk.length - Math.max(room, 0);
    return chunk.subarray(0, Math.max(room, 0));
  };

  const server = createServer((client) => {
    if (pairs.size >= maxConnections) {
      counters.refused++;
      client.destroy();
      return;
    }
    counters.accepted++;
    counters.live++;
    const n = stallCount++;
    const doomed = stallF > 0 && Math.floor((n + 1) * stallF + 1 - stallF) > Math.floor(n * stallF + 1 - stallF);
    const upstream = connect(options.target.port, options.target.host);
    for (const s of [client, upstream]) s.setNoDelay(true);
    const p: Pair = {
      client, upstream, up: new Lane(upstream), down: new Lane(client),
      doomed, silentAfter: stallAfterBytes, silent: false, started: false, startup: Buffer.alloc(0), bytesAfterStartup: 0,
    };
    pairs.add(p);
    client.on("data", (chunk: Buffer) => {
      const part = beforeSilence(p, chunk);
      if (part.length) forward(p, p.up, part);
    });
    upstream.on("data", (chunk: Buffer) => {
      let part = chunk;
      if (!p.started) {
        const parsed = startupDone(Buffer.concat([p.startup, chunk]));
        p.startup = parsed.rest;
        if (parsed.done) {
          p.started = true;
          p.startup = Buffer.alloc(0);
          // The startup reply goes through whole; what followed it counts towards silence.
          const tail = parsed.rest;
          const head = chunk.subarray(0, chunk.length - tail.length);
          forward(p, p.down, head);
          if (p.doomed && p.silentAfter === 0) {
            p.silent = true;
            counters.stalled++;
            counters.bytesSwallowed += tail.length;
            return;
          }
          part = beforeSilence(p, tail);
        }
      } else {
        part = beforeSilence(p, chunk);
      }
      if (part.length) forward(p, p.down, part);
    });
    // A silent pair stays open even when one side hangs up: silence means no news at all.
    for (const s of [client, upstream]) {
      s.on("error", () => destroy(p));
      s.on("close", () => {
        // The server hanging up during a pause is news like its bytes: it reaches the client after them, on resume.
        if (s === upstream && paused && !p.silent && p.down.held.length > 0) return void (p.hungUp = true);
        if (!p.silent || (client.destroyed && upstream.destroyed)) destroy(p);
      });
    }
  });

  const cutAll = () => {
    counters.cutEvents++;
    let n = 0;
    for (const p of [...pairs]) {
      destroy(p);
      n++;
    }
    counters.cut += n;
    return n;
  };

  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      resolve({
        host: "127.0.0.1",
        port,
        counters,
        cutAll,
        cutEvery(minMs, maxMs) {
          const next = () => {
            cutTimer = setTimeout(() => {
              cutAll();
              next();
            }, minMs + Math.random() * (maxMs - minMs));
            cutTimer.unref();
          };
          if (cutTimer) clearTimeout(cutTimer);
          next();
        },
        stopCutting() {
          if (cutTimer) clearTimeout(cutTimer);
          cutTimer = null;
        },
        stallFraction(f, opts = {}) {
          if (!(f >= 0 && f <= 1)) throw new Error(`stall fraction must be in [0, 1], got ${f}`);
          stallF = f;
          stallAfterBytes = opts.afterBytes ?? 0;
          stallCount = 0;
        },
        stallAll() {
          paused = true;
        },
        resume() {
          paused = false;
          for (const p of pairs) {
            for (const lane of [p.up, p.down]) {
              for (const chunk of lane.held.splice(0)) {
                counters.bytesForwarded += chunk.length;
                lane.to.write(chunk);
              }
              lane.heldBytes = 0;
            }
            if (p.hungUp) p.client.end(() => destroy(p));
          }
        },
        close() {
          if (cutTimer) clearTimeout(cutTimer);
          for (const p of [...pairs]) destroy(p);
          return new Promise<void>((done) => server.close(() => done()));
        },
      });
    });
  });
}

/** A fault proxy in front of the Postgres at `url`, and the URL that goes through it. */
export async function proxyInFront(url: string): Promise<{ proxy: FaultProxy; url: string }> {
  const target = new URL(url);
  const proxy = await startFaultProxy({ target: { host: target.hostname, port: Number(target.port || 5432) } });
  target.hostname = proxy.host;
  target.port = String(proxy.port);
  return { proxy, url: target.toString() };
}
