import { createServer, connect, type Socket } from "node:net";

/**
 * A TCP relay on 127.0.0.1 that holds every chunk for `delayMs` in each
 * direction, keeping order: a local stand-in for the round trips between a
 * Lambda and Neon. With 2 ms each way a query costs at least 4 ms more.
 *
 *   npx tsx bench/latency-relay.ts 127.0.0.1:5432 [delayMs] [listenPort]
 */

export interface LatencyRelay {
  host: string;
  port: number;
  /** Connections accepted and chunks forwarded so far. */
  stats: { connections: number; chunks: number };
  close(): Promise<void>;
}

/** Forwards `from` to `to`, each chunk `delayMs` after it arrived, in arrival order. */
function pipeDelayed(from: Socket, to: Socket, delayMs: number, stats: LatencyRelay["stats"]): void {
  const queue: { due: number; chunk: Buffer }[] = [];
  let timer: NodeJS.Timeout | null = null;
  let ended = false;
  const flush = () => {
    timer = null;
    const t = performance.now();
    while (queue.length > 0 && queue[0]!.due <= t) {
      stats.chunks++;
      if (!to.write(queue.shift()!.chunk)) {
        from.pause();
        to.once("drain", () => from.resume());
      }
    }
    if (queue.length > 0) timer = setTimeout(flush, queue[0]!.due - t);
    else if (ended) to.end();
  };
  from.on("data", (chunk: Buffer) => {
    queue.push({ due: performance.now() + delayMs, chunk });
    timer ??= setTimeout(flush, delayMs);
  });
  from.on("end", () => {
    ended = true;
    if (queue.length === 0 && !timer) to.end();
  });
}

export function startLatencyRelay(target: { host: string; port: number }, delayMs = 2, listenPort = 0): Promise<LatencyRelay> {
  const stats = { connections: 0, chunks: 0 };
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    stats.connections++;
    client.setNoDelay(true);
    const upstream = connect(target.port, target.host);
    upstream.setNoDelay(true);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    pipeDelayed(client, upstream, delayMs, stats);
    pipeDelayed(upstream, client, delayMs, stats);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(listenPort, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      resolve({
        host: "127.0.0.1",
        port,
        stats,
        close: () =>
          new Promise<void>((done) => {
            for (const s of sockets) s.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [target = "127.0.0.1:5432", delay = "2", listen = "0"] = process.argv.slice(2);
  const [host, port] = target.split(":");
  const relay = await startLatencyRelay({ host: host!, port: Number(port) }, Number(delay), Number(listen));
  console.log(`relaying 127.0.0.1:${relay.port} -> ${target}, +${delay} ms each way`);
}
