/**
 * The dashboard: one static HTML shell, its script and its stylesheet. They
 * hold no data and need no token; the script asks for the token (or takes
 * it from `#token=...`), keeps it in sessionStorage and reads everything
 * through the bearer-protected `/v1/...` routes, polling every 2 seconds.
 *
 * Served from strings, not files, so the esbuild-bundled Lambda and edge
 * runtimes carry it with no file access. Not in the OpenAPI document: these
 * are a page, not API routes (`test/api.test.ts` lists them as the only
 * undocumented routes).
 */
import type { Env, Hono } from "hono";
import { DASHBOARD_JS } from "./dashboard/client.ts";
import { DASHBOARD_CSS } from "./dashboard/style.ts";

/**
 * Scripts and styles from this origin only (no inline script, no eval),
 * requests to this origin only, no framing, no form posts, no <base>.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

// Relative URLs (`dashboard/app.js`, `v1/queues`) so the page also works
// when the API is mounted under a path prefix.
export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Leasehold</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="dashboard/app.css">
<script src="dashboard/app.js" defer></script>
</head>
<body>
<header>
  <h1><a href="#/">Leasehold</a></h1>
  <span class="spacer"></span>
  <span id="status" role="status">Loading…</span>
  <button type="button" id="signout" hidden>Sign out</button>
</header>
<main>
  <noscript><p>The dashboard needs JavaScript.</p></noscript>
  <section id="login" class="card" hidden>
    <h2>Sign in</h2>
    <form id="login-form">
      <label>API token <input type="password" id="token-input" autocomplete="off" spellcheck="false" required></label>
      <button type="submit">Open the dashboard</button>
    </form>
    <p id="login-error" role="alert"></p>
    <p class="muted">The token stays in this browser tab (sessionStorage) and is sent only to this API, as a bearer token.</p>
  </section>
  <div id="overview" hidden>
    <section class="card"><h2>Queues</h2><div id="queues"></div></section>
    <section class="card"><h2>Groups <small>as each claim shares a queue, busiest first</small></h2><div id="groups"></div></section>
    <section class="card" id="rates-section" hidden><h2>Rate limits <small>keys with due jobs, most waiting first</small></h2><div id="rates"></div></section>
    <section class="card"><h2>Throughput <small>attempts ended per minute, last 15 minutes</small></h2><div id="chart"></div></section>
    <section class="card"><h2>Recurring jobs <small>each tick enqueues one job; times in this browser's zone</small></h2><div id="recurring"></div></section>
    <section class="card" id="retried-section" hidden><h2>Retried from this page</h2><div id="retried"></div></section>
    <section class="card"><h2>Dead jobs</h2><div id="dead"></div></section>
  </div>
  <div id="job-view" hidden>
    <a class="back" href="#/">← Overview</a>
    <section class="card"><div id="job"></div></section>
  </div>
</main>
</body>
</html>
`;

const noCache = { "cache-control": "no-cache" };

export function registerDashboard<E extends Env>(app: Hono<E>) {
  app.get("/dashboard", (c) =>
    c.body(DASHBOARD_HTML, 200, { ...noCache, "content-type": "text/html; charset=utf-8", "content-security-policy": DASHBOARD_CSP }),
  );
  app.get("/dashboard/app.js", (c) =>
    c.body(DASHBOARD_JS, 200, { ...noCache, "content-type": "text/javascript; charset=utf-8" }),
  );
  app.get("/dashboard/app.css", (c) =>
    c.body(DASHBOARD_CSS, 200, { ...noCache, "content-type": "text/css; charset=utf-8" }),
  );
}
