/**
 * A Lambda endpoint that fails the way Lambda does, in front of the local
 * runtime: the functions' `AWS_ENDPOINT_URL_LAMBDA` points here, and each
 * Invoke is forwarded, or answered with the current fault:
 * - `throttle`: 429 TooManyRequestsException, with Retry-After and a Reason;
 * - `notFound`: 404 ResourceNotFoundException;
 * - `reset`: the connection reset (RST) once the request is read;
 * - `refuse`: nothing listens on the port (connection refused);
 * - `hang`: the request is read and never answered.
 * Every Invoke it sees is recorded with its time, function and what it got.
 */
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";

export type InvokeFault = "none" | "throttle" | "notFound" | "reset" | "refuse" | "hang";

export interface InvokeRecord {
  atMs: number;
  fn: string;
  fault: InvokeFault;
}

export interface InvokeFaults {
  url: string;
  /** Where Invokes are forwarded (the local runtime's URL); set once it runs. */
  target: string;
  /** Switches the fault; `refuse` closes the port, anything else opens it again. */
  set(fault: InvokeFault, options?: { retryAfterSeconds?: number }): Promise<void>;
  records: InvokeRecord[];
  close(): Promise<void>;
}

const INVOKE_PATH = /^\/2015-03-31\/functions\/([^/]+)\/invocations/;

export async function startInvokeFaults(): Promise<InvokeFaults> {
  let fault: InvokeFault = "none";
  let retryAfterSeconds = 1;
  const sockets = new Set<Socket>();
  const records: InvokeRecord[] = [];
  const self: InvokeFaults = { url: "", target: "", set, records, close };

  const server: Server = createServer((req, res) => void handle(req, res));
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await listen(0);
  const { port } = server.address() as { port: number };
  self.url = `http://127.0.0.1:${port}`;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const fn = decodeURIComponent(INVOKE_PATH.exec(req.url ?? "")?.[1] ?? "").split(":").at(-1) ?? "";
    if (fn) records.push({ atMs: Date.now(), fn, fault });
    if (!fn || fault === "none") return forward(req, Buffer.concat(chunks), res);
    if (fault === "hang") return;
    if (fault === "reset") return void req.socket.resetAndDestroy();
    const [status, type, body] = fault === "throttle"
      ? [429, "TooManyRequestsException", { message: "Rate Exceeded.", Reason: "ConcurrentInvocationLimitExceeded" }]
      : [404, "ResourceNotFoundException", { message: `Function not found: ${fn}` }];
    const headers: Record<string, string> = { "Content-Type": "application/json", "x-amzn-ErrorType": type };
    if (fault === "throttle") headers["Retry-After"] = String(retryAfterSeconds);
    res.writeHead(status, headers);
    res.end(JSON.stringify({ Type: "User", ...body }));
  }

  function forward(req: IncomingMessage, body: Buffer, res: ServerResponse): void {
    const target = new URL(self.target);
    const out = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host } }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    out.on("error", () => res.destroy());
    out.end(body);
  }

  function listen(at: number): Promise<void> {
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(at, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
  }

  function dropAll(): Promise<void> {
    for (const socket of sockets) socket.destroy();
    return server.listening ? new Promise((resolve) => server.close(() => resolve())) : Promise.resolve();
  }

  async function set(next: InvokeFault, options: { retryAfterSeconds?: number } = {}): Promise<void> {
    retryAfterSeconds = options.retryAfterSeconds ?? 1;
    // Hung requests end with the fault; kept-alive connections too, so the next Invoke connects afresh.
    for (const socket of sockets) socket.destroy();
    if (next === "refuse" && server.listening) await dropAll();
    if (next !== "refuse" && !server.listening) await listen(port);
    fault = next;
  }

  async function close(): Promise<void> {
    await dropAll();
  }

  return self;
}
