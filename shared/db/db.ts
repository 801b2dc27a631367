/**
 * The database seam: everything in the core talks to Postgres through
 * `Queryable`, which a `pg` Pool/Client and a Neon Pool/Client all satisfy.
 * A caller's own transaction client is a Queryable too, which is how enqueue
 * joins it.
 */
export interface QueryResult<R> {
  rows: R[];
  rowCount: number | null;
}

export interface Queryable {
  query<R = Record<string, unknown>>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
}

/** A connection lent by a pool: given back with `release` (with an error, destroyed). */
export interface PoolClient extends Queryable {
  release(err?: Error | boolean): void;
  on(event: "error", listener: (err: Error) => void): unknown;
  off(event: "error", listener: (err: Error) => void): unknown;
}

/** A pool: queries, plus a dedicated client for transactions. */
export interface Pool extends Queryable {
  connect(): Promise<PoolClient>;
  end(): Promise<void>;
}

/** The core's view of one Leasehold installation: where, and through what. */
export interface Store {
  db: Queryable;
  /** Postgres schema holding the tables; `leasehold` unless configured. */
  schema: string;
}

/** A schema name Leasehold accepts: a plain lowercase identifier Postgres need not quote (at most 63 bytes). The one definition. */
export const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
const cache = new Map<string, Map<string, string>>();

/** The schema name, validated as a plain identifier and quoted. */
export function schemaIdent(schema: string): string {
  if (!SCHEMA_NAME.test(schema)) throw new Error(`invalid schema name: ${JSON.stringify(schema)}`);
  return `"${schema}"`;
}

/**
 * Returns `text` with the `leasehold.` schema prefix replaced by `schema`.
 * The SQL stays static: the schema name is the only thing spliced in, it is
 * validated as a plain identifier, and each statement is rewritten once.
 */
export function sql(schema: string, text: string): string {
  let bySchema = cache.get(schema);
  if (!bySchema) {
    schemaIdent(schema);
    bySchema = new Map();
    cache.set(schema, bySchema);
  }
  let out = bySchema.get(text);
  if (out === undefined) {
    out = schema === "leasehold" ? text : text.replace(/\bleasehold\./g, `"${schema}".`);
    bySchema.set(text, out);
  }
  return out;
}

/** Runs `fn` inside a transaction on one pooled client. */
export async function transaction<T>(pool: Pool, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // A lent connection has no listener of its pool's: lost between two
  // statements, its error would end the process. Heard, it fails the next one.
  let lost: Error | undefined;
  const onError = (err: Error) => void (lost ??= err);
  client.on("error", onError);
  try {
    await client.query("begin");
    const result = await fn(client);
    await client.query("commit");
    return result;
  } catch (err) {
    if (!lost) await client.query("rollback").catch(() => {});
    throw err;
  } finally {
    // A lost connection is destroyed and keeps the listener: it may still report its end.
    if (lost) client.release(lost);
    else (client.off("error", onError), client.release());
  }
}

/** How long an invocation waits for its pool to close before it returns anyway. */
export const POOL_CLOSE_MS = 2_000;

/**
 * Closes an invocation's pool, but never waits on it for more than
 * `POOL_CLOSE_MS`: a connection gone silent would hold `end()` until the
 * invocation times out, turning finished work into a failed invocation.
 */
export async function closePool(pool: Pool): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    pool.end().catch(() => {}),
    new Promise<void>((resolve) => (timer = setTimeout(resolve, POOL_CLOSE_MS))),
  ]);
  clearTimeout(timer);
}
