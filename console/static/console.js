// postbox console: the page's small behaviours. No inline script runs
// (the Content-Security-Policy forbids it); the pages work without this
// file, it only adds comfort.
"use strict";

// Live refresh: a <main data-refresh="N"> page fetches itself every N
// seconds and swaps its main element, while the tab is visible.
function startRefresh(main) {
  const every = Number(main.dataset.refresh) * 1000;
  if (!(every > 0)) return;
  const refresh = async () => {
    if (document.hidden) return;
    try {
      const res = await fetch(location.href, { credentials: "same-origin", headers: { "X-Refresh": "1" } });
      if (res.status === 401) {
        // The session ended (idle, too old, logged out elsewhere): show
        // the login page rather than counts that no longer move.
        location.reload();
        return;
      }
      if (!res.ok) return;
      const doc = new DOMParser().parseFromString(await res.text(), "text/html");
      const fresh = doc.getElementById("main");
      if (fresh && fresh.dataset.source !== main.dataset.source) {
        // Another tab switched the source: show the page whole, its
        // switcher included, rather than one source's counts under the
        // other's name.
        location.reload();
        return;
      }
      if (fresh) main.replaceChildren(...Array.from(fresh.childNodes, (n) => document.importNode(n, true)));
      document.documentElement.dataset.refreshed = String(Date.now());
      // A page that stopped changing (a replay that ended) says so by
      // refreshing no more.
      if (fresh && !fresh.dataset.refresh) clearInterval(timer);
    } catch (e) {
      // The next tick tries again.
    }
  };
  const timer = setInterval(refresh, every);
}

// Selection on the failed page: "this page" ticks every row; "every
// failed event that matches" unticks them (the filters decide).
function startSelection() {
  const page = document.getElementById("select-page");
  const all = document.getElementById("select-all");
  const rows = () => document.querySelectorAll('#failed input[name="id"]');
  if (page) {
    page.addEventListener("change", () => {
      rows().forEach((box) => { box.checked = page.checked; });
      if (page.checked && all) all.checked = false;
    });
  }
  if (all) {
    all.addEventListener("change", () => {
      if (!all.checked) return;
      rows().forEach((box) => { box.checked = false; });
      if (page) page.checked = false;
    });
  }
}

// The failed page's selector of where dead letters are read (the outbox,
// every endpoint, one endpoint) shows the choice at once, with the
// filters as they are.
function startEndpointSelector() {
  const select = document.getElementById("endpoint-select");
  if (select && select.form) select.addEventListener("change", () => select.form.requestSubmit());
}

// The source switcher of a console over many sources switches at once.
function startSourceSwitcher() {
  const select = document.getElementById("source-select");
  if (select && select.form) select.addEventListener("change", () => select.form.requestSubmit());
}

document.addEventListener("DOMContentLoaded", () => {
  const main = document.getElementById("main");
  if (main) startRefresh(main);
  startSelection();
  startEndpointSelector();
  startSourceSwitcher();
});
