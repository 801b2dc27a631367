/**
 * The session token, the API calls, the polling, and the overview's refresh
 * (what it fetches and which section each answer renders into).
 * A piece of the dashboard's script (see ./client.ts): plain browser
 * JavaScript kept as a string, no backticks or `${` inside.
 */
export const DASHBOARD_DATA_JS = String.raw`  // ---- token -------------------------------------------------------------------------------
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
`;
