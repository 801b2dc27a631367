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

/**
 * Runs `fn` inside a transaction on one pooled client. `opening`, static
 * statements without parameters, is sent with the `begin` in one round trip
 * (each statement still reads its own snapshot); `fn` gets the rows of its
 * last statement.
 */
export async function transaction<T>(pool: Pool, fn: (tx: Queryable, opened: unknown[]) => Promise<T>, opening?: string): Promise<T> {
  const client = await pool.connect();
  // A lent connection has no listener of its pool's: lost between two
  // statements, its error would end the process. Heard, it fails the next one.
  let lost: Error | undefined;
  const onError = (err: Error) => void (lost ??= err);
  client.on("error", onError);
  try {
    const begun = await client.query(opening ? `begin; ${opening}` : "begin");
    // Several statements answer with a result each.
    const last = (Array.isArray(begun) ? begun.at(-1) : begun) as QueryResult<unknown>;
    const result = await fn(client, opening ? last.rows : []);
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

/** A statement sent by name (`hotQuery`): Postgres keeps it prepared on the connection that ran it. */
export interface NamedStatement {
  name: string;
  text: string;
  values: unknown[];
}

/** Sends `text` or a statement by name: pg and Neon take one where they take the other. */
export const send = <R>(db: Queryable, text: string | NamedStatement, values?: unknown[]) =>
  (db.query as (text: string | NamedStatement, values?: unknown[]) => Promise<QueryResult<R>>)(text, values);

/** A database handle that sends by name → the pool of Leasehold's own it sends through. */
const naming = new WeakMap<object, object>();

/**
 * Marks a pool Leasehold made itself (shared/db/drivers/): `hotQuery` sends
 * its statements by name. A caller's own pool or transaction client, or a
 * wrapper of a pool, is sent plain text, as it always was.
 */
export function namesStatements<P extends object>(pool: P): P {
  naming.set(pool, pool);
  return pool;
}

/**
 * `db` passes what it is sent, a `NamedStatement` too, to the connections
 * of `through` (a wrapper: under a write deadline, or counting): it sends
 * by name when `through` does.
 */
export function namesAs<D extends object>(db: D, through: object): D {
  const pool = naming.get(through);
  if (pool) naming.set(db, pool);
  return db;
}

/**
 * The statements sent over and over: the claim, the settle, the enqueue's
 * inserts. To a pool of Leasehold's own they go by name, so each connection
 * parses one once, and Postgres stops planning it once a generic plan costs
 * no more than the first five custom ones did (a settle was planned for
 * about 1 ms, an enqueue of one job for half of its 0.9 ms).
 *
 * A pooler that does not keep prepared statements per client (PgBouncer in
 * transaction mode before 1.21) answers that one does not exist or already
 * exists, and a migration that changed a statement's result type makes its
 * cached plan fail: each is raised before the statement runs, so it is sent
 * again as text, and that pool is sent text from then on. A name is a hash
 * of the text, so a server connection that has it prepared by another
 * client has prepared the same statement.
 */
export async function hotQuery<R = Record<string, unknown>>(store: Store, text: string, values: unknown[]): Promise<QueryResult<R>> {
  const db = store.db;
  const pool = naming.get(db);
  if (!pool || !naming.has(pool)) return db.query<R>(text, values);
  try {
    return await send<R>(db, { name: statementName(text), text, values });
  } catch (err) {
    if (!notPrepared(err)) throw err;
    naming.delete(pool);
    return db.query<R>(text, values);
  }
}

const NOT_PREPARED = new Set(["26000", "42P05"]);
function notPrepared(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: string; message?: string };
  return NOT_PREPARED.has(code ?? "") || (code === "0A000" && /cached plan must not change result type/.test(message ?? ""));
}

const names = new Map<string, string>();

/** `lh_` and a 53-bit hash of the text (cyrb53): about 10^-12 odds of two of a few hundred statements sharing one. */
export function statementName(text: string): string {
  let name = names.get(text);
  if (name !== undefined) return name;
  let h1 = 0xdeadbeef ^ text.length;
  let h2 = 0x41c6ce57 ^ text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  name = `lh_${(4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36)}`;
  names.set(text, name);
  return name;
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
