// Live updates for every page: one EventSource per page on /api/events.
// On an event that concerns this page, re-fetch the page's own content
// (?fragment=1, server-rendered and escaped) and swap it in — at most once
// per second. No polling: nothing is fetched until the server says
// something changed. When the stream (re)connects, the page is fetched once
// too: whatever changed between rendering the page and subscribing, or
// while disconnected, is not announced again.
//
// A page must never look current when it is not: while the server says the
// store fails (event "store", ok false, with what failed) or the last re-fetch
// failed (a 503 while the store is down, say), the banner #stale says so and
// why, the header says "not current" instead of "live", and <body
// data-stale="yes">; all three clear once a re-fetch succeeds again.
//
// The server caps the live streams it keeps open (a 503 past it). A refused
// stream is not retried by the browser (EventSource closes on any answer
// but 200), so the page says it is not live — the banner, "○ not live",
// <body data-live="refused"> — keeps what it shows, and asks again after 30 s,
// then 1, 2, 4 and at most 5 minutes; a reload asks at once.
"use strict";
(function () {
  var main = document.getElementById("live");
  var status = document.getElementById("live-status");
  // Pages with a form in their content (log in) are not replaced under the user's typing.
  if (!main || !window.EventSource || main.getAttribute("data-live") !== "on") { return; }
  var job = main.getAttribute("data-job") || "";
  var stale = document.getElementById("stale");
  var busy = false, again = "", last = 0, updates = 0;
  var connected = false, storeDown = "", fetchFailed = "", refused = false, retryMs = 30000;

  function showState() {
    var why = refused ? "the server refused this page live updates (it has as many open as it allows;"
        + " it asks again in " + Math.round(retryMs / 1000) + " s). Reload to see changes"
      : storeDown ? "cannot read the store: " + storeDown
      : fetchFailed ? "this page could not be updated (" + fetchFailed + ")" : "";
    document.body.setAttribute("data-live", refused ? "refused" : connected ? "on" : "off");
    document.body.setAttribute("data-stale", why ? "yes" : "");
    if (stale) {
      stale.textContent = why ? "Not current: " + why + ". What this page shows may be out of date." : "";
      stale.hidden = !why;
    }
    if (!status) { return; }
    if (refused) {
      status.textContent = "○ not live"; status.className = "live-stale";
    } else if (!connected) {
      status.textContent = "○ reconnecting"; status.className = "live-off";
    } else if (why) {
      status.textContent = "○ not current"; status.className = "live-stale";
    } else {
      status.textContent = "● live"; status.className = "live-on";
    }
  }

  function fragmentUrl() {
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    return url.toString();
  }

  // reason: the event that asked for it ("open" after (re)connecting); kept on
  // <body data-refreshed-by> with a count in data-updates, for tests and curious people.
  function refresh(reason) {
    var wait = 1000 - (Date.now() - last);
    if (busy) { again = reason; return; }
    if (wait > 0) {
      busy = true;
      setTimeout(function () { busy = false; refresh(again || reason); again = ""; }, wait);
      return;
    }
    busy = true; last = Date.now();
    fetch(fragmentUrl(), { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (r.ok) { return r.text(); }
        // The error page's one line (#message), else the status: what the operator is told.
        return r.text().then(function (body) {
          var doc = new DOMParser().parseFromString(body, "text/html");
          var line = doc.getElementById("message");
          return Promise.reject("HTTP " + r.status + (line ? ": " + line.textContent : ""));
        }, function () { return Promise.reject("HTTP " + r.status); });
      })
      .then(function (html) {
        main.innerHTML = html;
        updates += 1;
        fetchFailed = "";
        document.body.setAttribute("data-updates", String(updates));
        document.body.setAttribute("data-refreshed-by", reason);
        showState();
      })
      .catch(function (why) {
        // Keep what is shown, but say it is not current; the next event retries.
        fetchFailed = typeof why === "string" ? why : "the server did not answer";
        showState();
      })
      .then(function () {
        busy = false;
        if (again) { var next = again; again = ""; refresh(next); }
      });
  }

  function concerns(e) {
    if (!job) { return true; }
    try { return JSON.parse(e.data).job === job; } catch (err) { return false; }
  }

  var kinds = (main.getAttribute("data-kinds") || "").split(" ");

  function connect() {
    var source = new EventSource(main.getAttribute("data-events"));
    source.onopen = function () {
      connected = true;
      if (refused) { refused = false; retryMs = 30000; }
      showState();
      refresh("open");
    };
    source.onerror = function () {
      connected = false;
      if (source.readyState === EventSource.CLOSED) {
        // Not a lost connection (the browser retries those): the server answered, and not 200.
        refused = true;
        showState();
        setTimeout(connect, retryMs);
        retryMs = Math.min(retryMs * 2, 300000);
        return;
      }
      showState();
    };
    // The store's state comes first: a page re-fetched while it is down fails, and says why.
    source.addEventListener("store", function (e) {
      var data = {};
      try { data = JSON.parse(e.data); } catch (err) { /* not JSON: treat as down */ }
      storeDown = data.ok ? "" : String(data.error || "unavailable");
      showState();
    });
    // Which events this page shows (data-kinds); job events only when they are about its job.
    kinds.forEach(function (name) {
      if (!name) { return; }
      var perJob = name === "ledger" || name === "audit";
      source.addEventListener(name, function (e) { if (!perJob || concerns(e)) { refresh(name); } });
    });
  }
  connect();
})();
