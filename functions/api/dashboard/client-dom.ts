/**
 * The script's start: its constants, and the DOM helpers that set text and
 * attributes only (never HTML), and re-render a section only when its data changed.
 * A piece of the dashboard's script (see ./client.ts): plain browser
 * JavaScript kept as a string, no backticks or `${` inside.
 */
export const DASHBOARD_DOM_JS = String.raw`"use strict";
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

`;
