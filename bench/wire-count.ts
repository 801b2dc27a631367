import { readFileSync } from "node:fs";
import net from "node:net";
import type { Route } from "./db.ts";

/**
 * A pass-through TCP proxy between a library and Postgres that counts the
 * protocol at the wire, whatever the library's driver does: frontend messages
 * by type (Q simple query, P parse, B bind, E execute, S sync ...), round
 * trips (ReadyForQuery 'Z' replies: each ends one wait of the client),
 * transactions (a 'Z' whose status is idle ends one, as pg_stat_database
 * counts them), and bytes each way. It also learns each backend's pid from
 * BackendKeyData and reads the backend's CPU time (/proc/<pid>/schedstat, ns)
 * just before it forwards the client's Terminate, so the CPU of the backends
 * that served this library is known exactly, and no other backend's.
 */

export interface WireCounts {
  connections: number;
  /** Frontend messages by type letter. */
  frontend: Record<string, number>;
  /** ReadyForQuery replies after the first of each connection: one per client wait. */
  round_trips: number;
  /** Execute + simple Query messages. */
  statements: number;
  /** ReadyForQuery with status idle (after the first): transactions ended, commits and read-only alike. */
  transactions: number;
  bytes_up: number;
  bytes_down: number;
  /** CPU of the backends behind these connections once started (from BackendKeyData to Terminate, ns). */
  backend_cpu_ns: number;
  /** CPU of starting those backends (fork, authentication, start-up: up to BackendKeyData, ns). */
  backend_start_cpu_ns: number;
  backends_unread: number;
  /** Connections still open when counted (their CPU is the latest reading). */
  open: number;
  /**
   * Backend CPU and count by statement, keyed by the start of its text
   * (whitespace folded): the backend's CPU read when the client sends the
   * statement's Sync (or simple Query) and again at its ReadyForQuery.
   */
  by_statement: Record<string, { count: number; cpu_us: number }>;
}

/** The label of a statement: the start of its text, whitespace folded. */
export const statementLabel = (text: string) => text.replace(/\s+/g, " ").trim().slice(0, 70);

const cstrings = (body: Buffer, n: number): string[] => {
  const out: string[] = [];
  let at = 0;
  for (let k = 0; k < n; k++) {
    const end = body.indexOf(0, at);
    if (end < 0) { out.push(body.subarray(at).toString("utf8")); break; }
    out.push(body.subarray(at, end).toString("utf8"));
    at = end + 1;
  }
  return out;
};

const SSL_REQUEST = 80877103;
/** Of a kept message, only its first bytes are kept (enough for a statement's name and the start of its text). */
const KEEP_BYTES = 512;
const GSS_REQUEST = 80877104;

/** Splits a byte stream into protocol messages (type letter, length-prefixed), across chunk boundaries. */
class Messages {
  private head = Buffer.alloc(0);
  private skip = 0;
  private type = "";
  private body: Buffer[] | null = null;
  private kept = 0;
  constructor(
    /** The frontend's first message has no type byte. */
    private startup: boolean,
    private keep: (type: string) => boolean,
    private on: (type: string, body: Buffer | null) => void,
  ) {}

  /** The backend's one-byte answer to SSLRequest has no length either. */
  oneByteNext = 0;

  feed(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.skip > 0) {
        const k = Math.min(this.skip, chunk.length - i);
        if (this.body && this.kept < KEEP_BYTES) {
          this.body.push(chunk.subarray(i, i + Math.min(k, KEEP_BYTES - this.kept)));
          this.kept += k;
        }
        i += k;
        this.skip -= k;
        if (this.skip === 0) this.emit();
        continue;
      }
      if (this.oneByteNext > 0 && this.head.length === 0) {
        this.oneByteNext--;
        i++;
        continue;
      }
      const need = this.startup ? 4 : 5;
      const k = Math.min(need - this.head.length, chunk.length - i);
      this.head = Buffer.concat([this.head, chunk.subarray(i, i + k)]);
      i += k;
      if (this.head.length < need) continue;
      const len = this.startup ? this.head.readInt32BE(0) : this.head.readInt32BE(1);
      this.type = this.startup ? "startup" : String.fromCharCode(this.head[0]!);
      this.head = Buffer.alloc(0);
      this.skip = len - 4;
      this.body = this.keep(this.type) ? [] : null;
      this.kept = 0;
      if (this.skip === 0) this.emit();
    }
  }

  private emit(): void {
    const body = this.body ? Buffer.concat(this.body) : null;
    if (this.type === "startup") {
      const code = body && body.length >= 4 ? body.readInt32BE(0) : 0;
      if (code !== SSL_REQUEST && code !== GSS_REQUEST) this.startup = false;
      this.on(code === SSL_REQUEST || code === GSS_REQUEST ? "ssl-request" : "startup", body);
    } else {
      this.on(this.type, body);
    }
    this.body = null;
  }
}

/** CPU time of process `pid` so far (ns), from /proc/<pid>/schedstat; null if it cannot be read. */
export function processCpuNs(pid: number): number | null {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]);
  } catch {
    return null;
  }
}

interface Conn {
  /** Named prepared statements of this connection: name -> label. */
  named: Map<string, string>;
  /** The statement being sent or awaited, and the backend's CPU when it was sent. */
  label: string | null;
  sentCpuNs: number | null;
  pid: number | null;
  cpuNs: number | null;
  seenReady: boolean;
  closed: boolean;
}

export interface WireCounter {
  route: Route;
  /** Counts since the last take(), then starts afresh (open connections carry over, their CPU so far counted). */
  take(): WireCounts;
  /** Pids of the backends behind open connections. */
  backendPids(): number[];
  close(): Promise<void>;
}

const empty = (): WireCounts => ({
  connections: 0, frontend: {}, round_trips: 0, statements: 0, transactions: 0,
  bytes_up: 0, bytes_down: 0, backend_cpu_ns: 0, backend_start_cpu_ns: 0, backends_unread: 0, open: 0, by_statement: {},
});

export async function startWireCounter(upstream: Route): Promise<WireCounter> {
  let c = empty();
  const conns = new Set<Conn>();
  // CPU already counted for open connections at the last take().
  const counted = new Map<Conn, number>();
  const readCpu = (conn: Conn) => {
    if (conn.pid == null) return;
    const ns = processCpuNs(conn.pid);
    if (ns != null) conn.cpuNs = ns;
  };
  const settle = (conn: Conn) => {
    if (conn.closed) return;
    conn.closed = true;
    readCpu(conn);
    if (conn.cpuNs == null) c.backends_unread++;
    else c.backend_cpu_ns += conn.cpuNs - (counted.get(conn) ?? 0);
    counted.delete(conn);
    conns.delete(conn);
  };
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    client.setNoDelay(true);
    const conn: Conn = { named: new Map(), label: null, sentCpuNs: null, pid: null, cpuNs: null, seenReady: false, closed: false };
    conns.add(conn);
    c.connections++;
    const server = net.connect(upstream.port, upstream.host);
    server.setNoDelay(true);
    sockets.add(client).add(server);
    const down = new Messages(false, (t) => t === "Z" || t === "K", (type, body) => {
      if (type === "K" && body) {
        conn.pid = body.readInt32BE(0);
        readCpu(conn);
        // Start-up is counted apart; the backend's work is counted from here.
        if (conn.cpuNs != null) {
          c.backend_start_cpu_ns += conn.cpuNs;
          counted.set(conn, conn.cpuNs);
        }
      } else if (type === "Z") {
        if (conn.label != null && conn.sentCpuNs != null && conn.pid != null) {
          const ns = processCpuNs(conn.pid);
          const st = (c.by_statement[conn.label] ??= { count: 0, cpu_us: 0 });
          st.count++;
          if (ns != null) st.cpu_us += Math.round((ns - conn.sentCpuNs) / 1000);
        }
        conn.label = null;
        conn.sentCpuNs = null;
        if (!conn.seenReady) conn.seenReady = true;
        else {
          c.round_trips++;
          if (body && body[0] === 0x49 /* I */) c.transactions++;
        }
      }
    });
    const up = new Messages(true, (t) => t === "P" || t === "B" || t === "Q", (type, body) => {
      c.frontend[type] = (c.frontend[type] ?? 0) + 1;
      if (type === "P" && body) {
        const [name, text] = cstrings(body, 2);
        const label = statementLabel(text ?? "");
        if (name) conn.named.set(name, label);
        conn.label ??= label;
      } else if (type === "B" && body && conn.label == null) {
        const [, name] = cstrings(body, 2);
        conn.label = name ? (conn.named.get(name) ?? `(prepared ${name})`) : null;
      } else if (type === "Q" && body) {
        conn.label = statementLabel(cstrings(body, 1)[0] ?? "");
      }
      // The statement goes to the backend with its Sync (or as a simple Query): its CPU from here to its ReadyForQuery.
      if ((type === "S" || type === "Q") && conn.pid != null) conn.sentCpuNs = processCpuNs(conn.pid);
      if (type === "E" || type === "Q") c.statements++;
      if (type === "ssl-request") down.oneByteNext++;
      // Terminate: read the backend's CPU before the message is forwarded and the backend exits.
      if (type === "X") settle(conn);
    });
    client.on("data", (d: Buffer) => {
      c.bytes_up += d.length;
      up.feed(d);
      server.write(d);
    });
    server.on("data", (d: Buffer) => {
      c.bytes_down += d.length;
      down.feed(d);
      client.write(d);
    });
    const end = () => {
      settle(conn);
      client.destroy();
      server.destroy();
      sockets.delete(client);
      sockets.delete(server);
    };
    client.on("end", end).on("error", end).on("close", end);
    server.on("end", end).on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    route: { host: "127.0.0.1", port },
    take() {
      for (const conn of conns) {
        readCpu(conn);
        if (conn.cpuNs != null) {
          c.backend_cpu_ns += conn.cpuNs - (counted.get(conn) ?? 0);
          counted.set(conn, conn.cpuNs);
        }
      }
      const out = { ...c, open: conns.size };
      c = empty();
      return out;
    },
    backendPids: () => [...conns].flatMap((x) => (x.pid == null ? [] : [x.pid])),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
