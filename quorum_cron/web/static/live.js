// Live updates for every page: one EventSource per page on /api/events.
// On an event that concerns this page, re-fetch the page's own content
// (?fragment=1, server-rendered and escaped) and swap it in — at most once
// per second. No polling: nothing is fetched until the server says
// something changed. When the stream (re)connects, the page is fetched once
// too: whatever changed between rendering the page and subscribing, or
// while disconnected, is not announced again.
"use strict";
(function () {
  var main = document.getElementById("live");
  var status = document.getElementById("live-status");
  // Pages with a form in their content (log in) are not replaced under the user's typing.
  if (!main || !window.EventSource || main.getAttribute("data-live") !== "on") { return; }
  var job = main.getAttribute("data-job") || "";
  var busy = false, again = "", last = 0, updates = 0;

  function fragmentUrl() {
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    url.searchParams.delete("done");
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
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        main.innerHTML = html;
        updates += 1;
        document.body.setAttribute("data-updates", String(updates));
        document.body.setAttribute("data-refreshed-by", reason);
      })
      .catch(function () { /* the next event retries */ })
      .then(function () {
        busy = false;
        if (again) { var next = again; again = ""; refresh(next); }
      });
  }

  function concerns(e) {
    if (!job) { return true; }
    try { return JSON.parse(e.data).job === job; } catch (err) { return false; }
  }

  var source = new EventSource(main.getAttribute("data-events"));
  source.onopen = function () {
    if (status) { status.textContent = "● live"; status.className = "live-on"; }
    refresh("open");
  };
  source.onerror = function () {
    if (status) { status.textContent = "○ reconnecting"; status.className = "live-off"; }
  };
  // Which events this page shows (data-kinds); job events only when they are about its job.
  var kinds = (main.getAttribute("data-kinds") || "").split(" ");
  kinds.forEach(function (name) {
    if (!name) { return; }
    var perJob = name === "ledger" || name === "audit";
    source.addEventListener(name, function (e) { if (!perJob || concerns(e)) { refresh(name); } });
  });
})();
