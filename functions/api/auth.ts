/**
 * Bearer-token authentication that runs anywhere Web Crypto does (Lambda,
 * edge runtimes): both tokens are hashed with SHA-256 and the digests are
 * compared in constant time, so neither a token's content nor its length
 * shows in the response time. A missing, malformed or wrong token is a 401.
 */
import type { MiddlewareHandler } from "hono";
import { ApiError } from "./errors.ts";

/** Shorter tokens are refused at start-up: they can be guessed. */
export const MIN_TOKEN_LENGTH = 16;

const sha256 = async (value: string) => new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(value)));

/** Equal-length byte arrays compared without an early exit. */
function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ (b[i] ?? 0);
  return diff === 0;
}

/** True when `given` is `token`, in time independent of both. */
export async function tokenMatches(token: string, given: string): Promise<boolean> {
  const [expected, actual] = await Promise.all([sha256(token), sha256(given)]);
  return constantTimeEqual(expected, actual);
}

export function bearerAuth(token: string): MiddlewareHandler {
  if (token.length < MIN_TOKEN_LENGTH) {
    throw new Error(`the API token must be at least ${MIN_TOKEN_LENGTH} characters`);
  }
  return async (c, next) => {
    const header = c.req.header("Authorization");
    if (!header) throw new ApiError(401, "unauthorized", "missing bearer token: send Authorization: Bearer <token>");
    const given = /^Bearer +(\S+) *$/i.exec(header)?.[1] ?? "";
    // Hashed and compared even when malformed, so the timing is the same.
    const ok = await tokenMatches(token, given);
    if (!ok || !given) throw new ApiError(401, "unauthorized", "wrong bearer token");
    await next();
  };
}

/** A random token for local use: 32 bytes, hex. */
export function generateToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
