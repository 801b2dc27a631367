/** The dashboard's stylesheet, served as `GET /dashboard/app.css` (CSP `style-src 'self'`). */
export const DASHBOARD_CSS = `
:root {
  --fg: #1d2430; --muted: #667085; --line: #e3e7ee; --bg: #f6f7f9; --card: #fff; --accent: #2453d6;
  --ok: #1f9d55; --fail: #d64545; --timeout: #e08a1e; --expired: #8b5cf6; --queued: #2453d6; --running: #0e8fa8;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg);
}
* { box-sizing: border-box; }
body { margin: 0; }
header { display: flex; align-items: center; gap: 16px; padding: 10px 24px; background: #111827; color: #fff; }
header h1 { font-size: 16px; margin: 0; font-weight: 600; letter-spacing: .02em; }
header h1 a { color: inherit; text-decoration: none; }
header .spacer { flex: 1; }
#status { font-size: 12px; color: #a7f3d0; }
#status.bad { color: #fecaca; }
#status.ok::before { content: "●"; margin-right: 6px; color: #34d399; }
header button { background: transparent; color: #d1d5db; border: 1px solid #4b5563; }
main { max-width: 1100px; margin: 0 auto; padding: 16px 24px 48px; }
section.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 14px 18px; margin-bottom: 16px; }
h2 { font-size: 15px; margin: 0 0 10px; }
h2 small { font-weight: normal; color: var(--muted); margin-left: 6px; }
h3 { font-size: 13px; margin: 18px 0 6px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
thead th { font-size: 12px; color: var(--muted); font-weight: 600; }
tbody th { font-weight: 600; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num.dead { color: var(--fail); font-weight: 600; }
td.num.running { color: var(--running); font-weight: 600; }
td.num.unserved { color: var(--fail); font-weight: 600; }
.when { white-space: nowrap; color: var(--muted); font-size: 12px; }
.muted, .empty { color: var(--muted); }
.empty { margin: 4px 0; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f3f4f6; border: 1px solid var(--line);
  border-radius: 6px; padding: 10px; overflow: auto; max-height: 360px; margin: 4px 0; white-space: pre-wrap; word-break: break-word; }
a { color: var(--accent); }
button { font: inherit; font-size: 13px; padding: 4px 12px; border-radius: 6px; border: 1px solid var(--accent); background: var(--accent);
  color: #fff; cursor: pointer; }
button:disabled { opacity: .6; cursor: default; }
button.cancel { background: #fff; color: var(--fail); border-color: var(--fail); }
.badge { display: inline-block; font-size: 11px; font-weight: 600; padding: 1px 8px; border-radius: 999px; background: #eef0f4; color: var(--muted); }
.badge.succeeded { background: #dcfce7; color: #166534; }
.badge.failed, .badge.dead { background: #fee2e2; color: #991b1b; }
.badge.timeout { background: #ffedd5; color: #9a3412; }
.badge.lease_expired { background: #ede9fe; color: #5b21b6; }
.badge.queued { background: #dbeafe; color: #1e40af; }
.badge.running { background: #cffafe; color: #155e75; }
ol.attempts { list-style: none; margin: 0; padding: 0; }
ol.attempts li { margin: 0 0 4px; }
.attempt-no { color: var(--muted); font-size: 12px; }
.error { color: #991b1b; font-size: 12px; word-break: break-word; }
details.error summary { cursor: pointer; }
details.error pre { color: var(--fg); }
svg.chart { width: 100%; height: auto; display: block; }
svg.chart .axis { stroke: #9ca3af; }
svg.chart .grid { stroke: var(--line); stroke-dasharray: 3 3; }
svg.chart .label { font-size: 10px; fill: var(--muted); }
svg.chart .label.end { text-anchor: end; }
svg.chart .hit { fill: transparent; }
svg.chart .bucket:hover .hit { fill: rgba(36, 83, 214, .06); }
.bar.succeeded, .swatch.succeeded { fill: var(--ok); background: var(--ok); }
.bar.failed, .swatch.failed { fill: var(--fail); background: var(--fail); }
.bar.timeout, .swatch.timeout { fill: var(--timeout); background: var(--timeout); }
.bar.leaseExpired, .swatch.leaseExpired { fill: var(--expired); background: var(--expired); }
ul.legend { list-style: none; display: flex; gap: 18px; padding: 0; margin: 6px 0 0; font-size: 12px; color: var(--muted); }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
.job-head { display: flex; align-items: center; gap: 12px; margin-bottom: 8px; }
.job-head h2 { margin: 0; }
.job-head .actions { margin-left: auto; display: flex; gap: 8px; }
dl.fields { display: grid; grid-template-columns: max-content 1fr max-content 1fr; gap: 4px 14px; margin: 8px 0; font-size: 13px; }
dl.fields dt { color: var(--muted); }
dl.fields dd { margin: 0; word-break: break-word; }
#login form { display: flex; gap: 8px; align-items: end; flex-wrap: wrap; }
#login label { display: flex; flex-direction: column; gap: 4px; font-weight: 600; font-size: 13px; }
#login input { font: inherit; padding: 6px 8px; width: 420px; max-width: 100%; border: 1px solid #cbd5e1; border-radius: 6px; }
#login-error { color: var(--fail); min-height: 1.2em; margin: 8px 0 0; }
.back { display: inline-block; margin-bottom: 10px; }
`;
