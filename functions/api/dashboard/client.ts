/**
 * The dashboard's script, served as `GET /dashboard/app.js` so the page's CSP
 * can be `script-src 'self'`. Plain browser JavaScript with no dependencies.
 * Every value from the API reaches the page through `textContent` or an
 * attribute set by `setAttribute`, never through HTML parsing.
 *
 * Kept as a string (not a function's `toString()`) so bundlers and test
 * transforms cannot inject helpers into it. No backticks or `${` inside.
 */
export const DASHBOARD_JS = String.raw`"use strict";
(() => {
  const TOKEN_KEY = "leasehold.token";
  const RETRIED_KEY = "leasehold.retried";
  const POLL_MS = 2000;
  const MINUTES = 15;
  const DEAD_LIMIT = 25;
  const RETRIED_LIMIT = 10;
  const TERMINAL = ["succeeded", "dead", "cancelled"];
  const SVG = "http://www.w3.org/2000/svg";

  const $ = (id) => document.getElementById(id);

  class AuthError extends Error {}

  // ---- DOM helpers: text only, never HTML -------------------------------------------------
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      el.setAttribute(k, String(v));
    }
    append(el, children);
    return el;
  }
  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    append(el, children);
    return el;
  }
  function append(el, children) {
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }
  const badge = (status) => h("span", { class: "badge " + status }, status.replace("_", " "));
  const jobLink = (id) => h("a", { href: "#/jobs/" + encodeURIComponent(id) }, "#" + id);
  const time = (iso) => (iso ? new Date(iso).toLocaleString() : "—");
  function age(seconds) {
    if (seconds < 1) return "—";
    if (seconds < 60) return Math.floor(seconds) + "s";
    if (seconds < 3600) return Math.floor(seconds / 60) + "m " + Math.floor(seconds % 60) + "s";
    if (seconds < 86400) return Math.floor(seconds / 3600) + "h " + Math.floor((seconds % 3600) / 60) + "m";
    return Math.floor(seconds / 86400) + "d " + Math.floor((seconds % 86400) / 3600) + "h";
  }
  const firstLine = (text) => String(text).split("\n")[0];
  function errorText(text) {
    if (!text) return h("span", { class: "muted" }, "—");
    const lines = String(text).split("\n");
    if (lines.length === 1) return h("span", { class: "error" }, text);
    return h("details", { class: "error" }, h("summary", {}, lines[0]), h("pre", {}, lines.slice(1).join("\n")));
  }

  // Re-renders a section only when its data changed, so open <details> and
  // focused buttons survive the polling.
  const rendered = new Map();
  function render(id, data, build) {
    const key = JSON.stringify(data);
    if (rendered.get(id) === key) return;
    rendered.set(id, key);
    $(id).replaceChildren(build(data));
  }

  // ---- token -------------------------------------------------------------------------------
  function tokenFromFragment() {
    const m = /^#token=([^&]*)/.exec(location.hash);
    if (!m) return;
    let token = "";
    try { token = decodeURIComponent(m[1]); } catch { token = ""; }
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    // The fragment never reached the server; now it leaves the address bar (the history entry is replaced).
    history.replaceState(null, "", location.pathname + location.search);
  }
  const token = () => sessionStorage.getItem(TOKEN_KEY);

  async function api(method, path) {
    const t = token();
    if (!t) throw new AuthError("Enter the API token.");
    const res = await fetch(path, {
      method, cache: "no-store", credentials: "omit",
      headers: { authorization: "Bearer " + t, accept: "application/json" },
    });
    let body = null;
    try { body = await res.json(); } catch { body = null; }
    if (res.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      throw new AuthError("The token was refused. Enter the API token.");
    }
    if (!res.ok) {
      const err = new Error((body && body.error && body.error.message) || "HTTP " + res.status);
      err.status = res.status;
      err.code = body && body.error && body.error.code;
      throw err;
    }
    return body;
  }

  // ---- status line -------------------------------------------------------------------------
  function status(text, bad) {
    const el = $("status");
    el.textContent = text;
    el.className = bad ? "bad" : "ok";
  }

  // ---- polling -----------------------------------------------------------------------------
  let generation = 0;
  let timer = null;
  let pausedWhileHidden = false;
  function refreshNow() {
    clearTimeout(timer);
    const g = ++generation;
    refresh(g).then(
      () => { if (g === generation) status("Live · updated " + new Date().toLocaleTimeString()); },
      (err) => {
        if (g !== generation) return;
        if (err instanceof AuthError) { showLogin(err.message); return; }
        status("Not updated: " + err.message, true);
      },
    ).finally(() => {
      if (g !== generation || !token()) return;
      timer = setTimeout(() => {
        if (document.hidden) pausedWhileHidden = true;
        else refreshNow();
      }, POLL_MS);
    });
  }
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && pausedWhileHidden) { pausedWhileHidden = false; refreshNow(); }
  });
  const stopPolling = () => { generation++; clearTimeout(timer); };

  function currentView() {
    const m = /^#\/jobs\/([1-9][0-9]{0,18})$/.exec(location.hash);
    return m ? { kind: "job", id: m[1] } : { kind: "overview" };
  }
  const refresh = (g) => (currentView().kind === "job" ? refreshJob(g, currentView().id) : refreshOverview(g));

  // ---- overview ----------------------------------------------------------------------------
  const attemptsCache = new Map(); // dead job id + finishedAt -> attempts (they cannot change while it stays dead)
  const retriedJobs = new Map(); // id -> last job seen

  const retriedIds = () => {
    try { return JSON.parse(sessionStorage.getItem(RETRIED_KEY) || "[]").filter((id) => /^[0-9]+$/.test(id)); }
    catch { return []; }
  };
  function rememberRetried(job) {
    const ids = [job.id, ...retriedIds().filter((id) => id !== job.id)].slice(0, RETRIED_LIMIT);
    sessionStorage.setItem(RETRIED_KEY, JSON.stringify(ids));
    retriedJobs.set(job.id, job);
  }

  async function refreshOverview(g) {
    const [queues, groups, throughput, dead, recurring] = await Promise.all([
      api("GET", "v1/queues"),
      api("GET", "v1/groups"),
      api("GET", "v1/throughput?minutes=" + MINUTES),
      api("GET", "v1/jobs?status=dead&limit=" + DEAD_LIMIT),
      api("GET", "v1/recurring"),
    ]);
    const keys = new Set(dead.jobs.map((j) => j.id + "@" + j.finishedAt));
    for (const key of attemptsCache.keys()) if (!keys.has(key)) attemptsCache.delete(key);
    const missing = dead.jobs.filter((j) => !attemptsCache.has(j.id + "@" + j.finishedAt));
    await Promise.all(missing.map(async (j) => {
      const detail = await api("GET", "v1/jobs/" + j.id).catch((err) => (err.status === 404 ? null : Promise.reject(err)));
      if (detail) attemptsCache.set(j.id + "@" + j.finishedAt, detail.attemptHistory);
    }));
    const ids = retriedIds();
    await Promise.all(ids.filter((id) => !TERMINAL.includes((retriedJobs.get(id) || {}).status)).map(async (id) => {
      const job = await api("GET", "v1/jobs/" + id).catch((err) => (err.status === 404 ? null : Promise.reject(err)));
      if (job) retriedJobs.set(id, job); else retriedJobs.delete(id);
    }));
    if (g !== generation) return;

    render("queues", queues.queues, queueTable);
    render("groups", groups.groups, groupTable);
    $("rates-section").hidden = groups.rateLimits.length === 0;
    render("rates", groups.rateLimits, rateTable);
    render("chart", throughput.buckets, chart);
    render("recurring", recurring.recurring, (jobs) => recurringTable(jobs, recurring.jobsModule));
    const retried = ids.map((id) => retriedJobs.get(id)).filter(Boolean)
      .map((j) => ({ id: j.id, name: j.name, queue: j.queue, status: j.status, attempts: j.attempts, finishedAt: j.finishedAt }));
    $("retried-section").hidden = retried.length === 0;
    render("retried", retried, retriedTable);
    const deadRows = dead.jobs.map((j) => ({
      id: j.id, name: j.name, queue: j.queue, finishedAt: j.finishedAt, lastError: j.lastError,
      attempts: attemptsCache.get(j.id + "@" + j.finishedAt) || [],
    }));
    render("dead", { rows: deadRows, more: dead.nextCursor !== null }, deadTable);
  }

  function queueTable(queues) {
    if (queues.length === 0) return h("p", { class: "empty" }, "No queued, running or dead jobs.");
    const num = (n, cls) => h("td", { class: "num" + (n > 0 && cls ? " " + cls : "") }, n);
    return h("table", { class: "queues" },
      h("thead", {}, h("tr", {}, h("th", {}, "Queue"), h("th", { class: "num" }, "Ready"),
        h("th", { class: "num", title: "ready jobs no runner can claim: queue not served, job type not deployed, or lease too long" }, "Unserved"),
        h("th", { class: "num" }, "Delayed"),
        h("th", { class: "num" }, "Running"), h("th", { class: "num" }, "Dead"), h("th", { class: "num" }, "Oldest ready"))),
      h("tbody", {}, queues.map((q) => h("tr", { "data-queue": q.queue },
        h("th", { scope: "row" }, q.queue), num(q.ready), num(q.unserved, "unserved"), num(q.delayed), num(q.running, "running"), num(q.dead, "dead"),
        h("td", { class: "num" }, age(q.oldestReadyAgeSeconds))))));
  }

  function groupTable(groups) {
    if (groups.length === 0) return h("p", { class: "empty" }, "No queued or running jobs.");
    const num = (n) => h("td", { class: "num" }, n === null ? "—" : n);
    return h("table", { class: "groups" },
      h("thead", {}, h("tr", {}, h("th", {}, "Queue"), h("th", {}, "Group"), h("th", { class: "num" }, "Ready"),
        h("th", { class: "num" }, "Running"), h("th", { class: "num" }, "Limit"))),
      h("tbody", {}, groups.map((g) => h("tr", { "data-queue": g.queue, "data-group": g.group === null ? "" : g.group },
        h("td", {}, g.queue), h("th", { scope: "row" }, g.group === null ? "—" : g.group), num(g.ready),
        h("td", { class: "num" + (g.running > 0 ? " running" : "") }, g.running), num(g.limit)))));
  }

  function rateTable(rates) {
    return h("table", { class: "rates" },
      h("thead", {}, h("tr", {}, h("th", {}, "Rate key"), h("th", { class: "num" }, "Waiting"),
        h("th", { class: "num", title: "jobs of the key started in the last period, over its limit" }, "Started"),
        h("th", { class: "num" }, "Period"), h("th", {}, "Opens"))),
      h("tbody", {}, rates.map((r) => h("tr", { "data-rate-key": r.key },
        h("th", { scope: "row" }, r.key), h("td", { class: "num" }, r.waiting),
        h("td", { class: "num" }, r.startedInWindow + " / " + r.limit), h("td", { class: "num" }, r.periodMs + " ms"),
        h("td", {}, r.opensAt ? when(r.opensAt) : "now")))));
  }

  // A time as a <time> element (the instant in its datetime attribute), shown in this browser zone.
  const when = (iso) => (iso ? h("time", { datetime: iso }, time(iso)) : h("span", { class: "muted" }, "—"));
  function recurringTable(jobs, jobsModule) {
    if (jobs.length === 0) {
      return h("p", { class: "empty" }, "No recurring jobs are declared (", jobsModule ? h("code", {}, jobsModule) : "the app's jobs module", " exports no ", h("code", {}, "recurring"), ").");
    }
    return h("table", { class: "recurring" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Job"), h("th", {}, "Cron"), h("th", {}, "Time zone"),
        h("th", { title: "a tick delivered late: skip it, or run it late" }, "Missed ticks"), h("th", {}, "Last tick"), h("th", {}, "Next run"))),
      h("tbody", {}, jobs.map((r) => h("tr", { "data-recurring": r.name },
        h("th", { scope: "row" }, r.name), h("td", {}, r.jobName), h("td", {}, h("code", {}, r.cron)), h("td", {}, r.timeZone),
        h("td", {}, r.missed === "run" ? "run late" : "skip"), h("td", { class: "last" }, when(r.lastTickAt)),
        h("td", { class: "next" }, when(r.nextRunAt))))));
  }

  const SERIES = [
    ["succeeded", "succeeded"], ["failed", "failed"], ["timeout", "timeout"], ["leaseExpired", "lease expired"],
  ];
  function chart(buckets) {
    const W = 720, H = 150, top = 12, bottom = 22, left = 34, right = 6;
    const total = (b) => SERIES.reduce((n, [k]) => n + b[k], 0);
    const peak = Math.max(1, ...buckets.map(total));
    const scale = (H - top - bottom) / peak;
    const slot = (W - left - right) / Math.max(1, buckets.length);
    const bar = Math.max(2, slot * 0.7);
    const svg = s("svg", { viewBox: "0 0 " + W + " " + H, class: "chart", role: "img",
      "aria-label": "Attempts ended per minute over the last " + buckets.length + " minutes" });
    const base = H - bottom;
    svg.append(
      s("line", { x1: left, x2: W - right, y1: base, y2: base, class: "axis" }),
      s("line", { x1: left, x2: W - right, y1: top, y2: top, class: "grid" }),
      s("text", { x: left - 4, y: top + 4, class: "label end" }, peak),
      s("text", { x: left - 4, y: base, class: "label end" }, 0),
    );
    const hhmm = (iso) => new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    buckets.forEach((b, i) => {
      const x = left + i * slot + (slot - bar) / 2;
      const g = s("g", { class: "bucket" },
        s("title", {}, hhmm(b.minute) + ": " + SERIES.map(([k, label]) => b[k] + " " + label).join(", ")));
      let y = base;
      for (const [k] of SERIES) {
        if (b[k] === 0) continue;
        const height = b[k] * scale;
        y -= height;
        g.append(s("rect", { x: x.toFixed(1), y: y.toFixed(1), width: bar.toFixed(1), height: Math.max(1, height).toFixed(1), class: "bar " + k }));
      }
      // An invisible full-height target, so the tooltip shows on empty minutes too.
      g.append(s("rect", { x: (left + i * slot).toFixed(1), y: top, width: slot.toFixed(1), height: base - top, class: "hit" }));
      svg.append(g);
    });
    if (buckets.length > 0) {
      svg.append(s("text", { x: left, y: H - 6, class: "label" }, hhmm(buckets[0].minute)));
      svg.append(s("text", { x: W - right, y: H - 6, class: "label end" }, "now"));
    }
    const sums = SERIES.map(([k, label]) => [k, label, buckets.reduce((n, b) => n + b[k], 0)]);
    const legend = h("ul", { class: "legend" }, sums.map(([k, label, n]) =>
      h("li", { "data-series": k }, h("span", { class: "swatch " + k }), label + " ", h("strong", {}, n))));
    return h("div", {}, svg, legend);
  }

  function retryButton(id, onDone) {
    const button = h("button", { type: "button", class: "retry", "data-job": id }, "Retry");
    button.addEventListener("click", async () => {
      button.disabled = true;
      button.textContent = "Retrying…";
      try {
        const job = await api("POST", "v1/jobs/" + id + "/retry");
        rememberRetried(job);
        status("Job #" + id + " is queued again");
        if (onDone) onDone(job);
        refreshNow();
      } catch (err) {
        if (err instanceof AuthError) { showLogin(err.message); return; }
        button.disabled = false;
        button.textContent = "Retry";
        status("Retry of #" + id + " failed: " + err.message, true);
        if (err.status === 409) refreshNow();
      }
    });
    return button;
  }

  function attemptList(attempts) {
    if (attempts.length === 0) return h("span", { class: "muted" }, "…");
    return h("ol", { class: "attempts" }, attempts.map((a) => h("li", {},
      h("span", { class: "attempt-no", title: "run: one more per claim (a handler's ctx.run)" }, "run " + a.run), " ",
      h("code", { class: "runner" }, a.runnerId || "no runner"), " ", badge(a.outcome), " ", errorText(a.error))));
  }

  function deadTable({ rows, more }) {
    if (rows.length === 0) return h("p", { class: "empty" }, "No dead jobs.");
    return h("div", {},
      h("table", { class: "dead" },
        h("thead", {}, h("tr", {}, h("th", {}, "Job"), h("th", {}, "Type"), h("th", {}, "Queue"), h("th", {}, "Died"),
          h("th", {}, "Attempts"), h("th", {}))),
        h("tbody", {}, rows.map((j) => h("tr", { "data-job": j.id },
          h("td", {}, jobLink(j.id)), h("td", {}, h("code", {}, j.name)), h("td", {}, j.queue), h("td", { class: "when" }, time(j.finishedAt)),
          h("td", {}, attemptList(j.attempts)), h("td", {}, retryButton(j.id)))))),
      more ? h("p", { class: "muted" }, "Showing the newest " + rows.length + " dead jobs.") : null);
  }

  function retriedTable(rows) {
    return h("table", { class: "retried" },
      h("thead", {}, h("tr", {}, h("th", {}, "Job"), h("th", {}, "Type"), h("th", {}, "Queue"), h("th", {}, "Status"),
        h("th", { class: "num" }, "Attempts"), h("th", {}, "Finished"))),
      h("tbody", {}, rows.map((j) => h("tr", { "data-job": j.id },
        h("td", {}, jobLink(j.id)), h("td", {}, h("code", {}, j.name)), h("td", {}, j.queue), h("td", { class: "status" }, badge(j.status)),
        h("td", { class: "num" }, j.attempts), h("td", { class: "when" }, time(j.finishedAt))))));
  }

  // ---- one job -----------------------------------------------------------------------------
  async function refreshJob(g, id) {
    let job;
    try {
      job = await api("GET", "v1/jobs/" + id);
    } catch (err) {
      if (err.status !== 404) throw err;
      job = null;
    }
    if (g !== generation) return;
    render("job", job || { missing: id }, job ? jobView : () => h("p", { class: "empty" }, "There is no job #" + id + "."));
  }

  function jobView(job) {
    const actions = [];
    if (job.status === "dead") actions.push(retryButton(job.id));
    if (job.status === "queued") {
      const cancel = h("button", { type: "button", class: "cancel" }, "Cancel");
      cancel.addEventListener("click", async () => {
        cancel.disabled = true;
        try { await api("POST", "v1/jobs/" + job.id + "/cancel"); status("Job #" + job.id + " cancelled"); }
        catch (err) { if (err instanceof AuthError) return showLogin(err.message); status("Cancel failed: " + err.message, true); }
        refreshNow();
      });
      actions.push(cancel);
    }
    const field = (label, value) => [h("dt", {}, label), h("dd", {}, value === null || value === undefined || value === "" ? "—" : value)];
    return h("div", {},
      h("div", { class: "job-head" },
        h("h2", {}, "Job #" + job.id + " ", h("code", {}, job.name)), badge(job.status), h("span", { class: "actions" }, actions)),
      h("dl", { class: "fields" },
        field("Queue", job.queue), field("Priority", job.priority), field("Attempts", job.attempts + " of " + job.maxAttempts),
        field("Run at", time(job.runAt)), field("Created", time(job.createdAt)), field("Started", time(job.startedAt)),
        field("Finished", time(job.finishedAt)), field("Runner", job.runnerId), field("Lease until", time(job.leaseExpiresAt)),
        field("Group", job.group), field("Dedupe key", job.dedupeKey),
        field("Last error", job.lastError ? errorText(job.lastError) : null)),
      h("h3", {}, "Payload"),
      h("pre", { class: "payload" }, JSON.stringify(job.payload, null, 2)),
      job.status === "succeeded" ? h("h3", {}, "Result") : null,
      job.status === "succeeded" ? h("pre", { class: "payload result" }, JSON.stringify(job.result, null, 2)) : null,
      h("h3", {}, "History"),
      job.attemptHistory.length === 0 ? h("p", { class: "empty" }, "No attempt has ended yet.") :
        h("table", { class: "history" },
          h("thead", {}, h("tr", {}, h("th", { class: "num", title: "run: one more per claim (a handler's ctx.run)" }, "Run"), h("th", { class: "num", title: "generation: 1, plus one per manual retry" }, "Gen"), h("th", {}, "Runner"), h("th", {}, "Claimed"),
            h("th", { class: "num" }, "Took"), h("th", {}, "Outcome"), h("th", {}, "Steps"), h("th", {}, "Error"))),
          h("tbody", {}, job.attemptHistory.map((a) => h("tr", {},
            h("td", { class: "num" }, a.run), h("td", { class: "num" }, a.generation), h("td", {}, h("code", {}, a.runnerId || "—")), h("td", { class: "when" }, time(a.claimedAt)),
            h("td", { class: "num" }, ((new Date(a.endedAt) - new Date(a.claimedAt)) / 1000).toFixed(2) + "s"),
            h("td", {}, badge(a.outcome)),
            h("td", {}, (a.steps || []).map((st) => st.name + (st.replayed ? " (replayed)" : " " + Math.round(st.ms) + "ms")).join(", ")),
            h("td", {}, errorText(a.error)))))));
  }

  // ---- views -------------------------------------------------------------------------------
  function showLogin(message) {
    stopPolling();
    rendered.clear();
    $("overview").hidden = true;
    $("job-view").hidden = true;
    $("signout").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    status("Signed out", true);
    $("token-input").focus();
  }

  function route() {
    if (!token()) return showLogin();
    const view = currentView();
    $("login").hidden = true;
    $("signout").hidden = false;
    $("overview").hidden = view.kind !== "overview";
    $("job-view").hidden = view.kind !== "job";
    if (view.kind === "job") {
      rendered.delete("job");
      $("job").replaceChildren(h("p", { class: "muted" }, "Loading job #" + view.id + "…"));
    }
    refreshNow();
  }

  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token-input").value.trim();
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    $("token-input").value = "";
    route();
  });
  $("signout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin();
  });
  window.addEventListener("hashchange", () => { tokenFromFragment(); route(); });

  tokenFromFragment();
  route();
})();
`;
