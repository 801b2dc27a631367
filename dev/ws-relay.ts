import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import { WebSocketServer } from "ws";

/**
 * A WebSocket-to-TCP relay that lets Neon's serverless driver reach a plain
 * Postgres: each WebSocket carries raw Postgres protocol bytes in binary
 * frames to the `address` the driver asks for. Loopback targets only.
 */
export async function startWsRelay(port = 0): Promise<{ address: string; close(): Promise<void> }> {
  const http: Server = createServer((_req, res) => res.writeHead(426).end("websocket only"));
  const wss = new WebSocketServer({ server: http });
  wss.on("connection", (ws, req) => {
    const address = new URL(req.url ?? "/", "http://relay").searchParams.get("address") ?? "";
    const match = /^(127\.0\.0\.1|localhost|\[::1\]):(\d+)$/.exec(address);
    if (!match) {
      ws.close(1008, "loopback addresses only");
      return;
    }
    const tcp = connect(Number(match[2]), match[1] === "[::1]" ? "::1" : match[1]!);
    tcp.setNoDelay(true);
    const pending: Buffer[] = [];
    tcp.on("connect", () => {
      for (const chunk of pending.splice(0)) tcp.write(chunk);
    });
    ws.on("message", (data: Buffer) => (tcp.connecting ? pending.push(data) : tcp.write(data)));
    tcp.on("data", (chunk) => ws.send(chunk, { binary: true }));
    tcp.on("close", () => ws.close());
    tcp.on("error", () => ws.close());
    ws.on("close", () => tcp.destroy());
    ws.on("error", () => tcp.destroy());
  });
  await new Promise<void>((resolve) => http.listen(port, "127.0.0.1", resolve));
  const { port: bound } = http.address() as { port: number };
  return {
    address: `127.0.0.1:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate();
        wss.close();
        http.close(() => resolve());
      }),
  };
}
