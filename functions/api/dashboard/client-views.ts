/**
 * The views: the queue, group, rate and recurring tables, the throughput
 * chart, the dead and retried jobs with their retry button, and one job's page.
 * A piece of the dashboard's script (see ./client.ts): plain browser
 * JavaScript kept as a string, no backticks or `${` inside.
 */
export const DASHBOARD_VIEWS_JS = String.raw`
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

`;
