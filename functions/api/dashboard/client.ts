/**
 * The dashboard's script, served as `GET /dashboard/app.js` so the page's CSP
 * can be `script-src 'self'`. Plain browser JavaScript with no dependencies.
 * Every value from the API reaches the page through `textContent` or an
 * attribute set by `setAttribute`, never through HTML parsing.
 *
 * Kept as a string (not a function's `toString()`) so bundlers and test
 * transforms cannot inject helpers into it. No backticks or `${` inside.
 */
import { DASHBOARD_DATA_JS } from "./client-data.ts";
import { DASHBOARD_DOM_JS } from "./client-dom.ts";
import { DASHBOARD_VIEWS_JS } from "./client-views.ts";

/** The login view and the router, which close the script the other parts open. */
const DASHBOARD_ROUTE_JS = String.raw`  // ---- views -------------------------------------------------------------------------------
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

/** The whole script, its parts in order: one closure, as the browser runs it. */
export const DASHBOARD_JS = [DASHBOARD_DOM_JS, DASHBOARD_DATA_JS, DASHBOARD_VIEWS_JS, DASHBOARD_ROUTE_JS].join("");
