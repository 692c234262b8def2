(function () {
  "use strict";
  var w = window, d = document, l = w.location, s = d.currentScript;
  if (!s) return;
  var site = s.getAttribute("data-site") || l.hostname;
  var api = s.getAttribute("data-api") || new URL("/api/event", s.src).href;
  var local = s.hasAttribute("data-allow-local");
  var hash = s.hasAttribute("data-hash");
  var last;

  function skip() {
    if (!local && (/^localhost$|^127(\.\d+){3}$|^\[::1\]$/.test(l.hostname) || l.protocol === "file:")) return 1;
    if (!local && (w._phantom || w.__nightmare || w.navigator.webdriver || w.Cypress)) return 1;
    try { if (w.localStorage.tally_ignore === "true") return 1; } catch (e) {}
    return 0;
  }

  function send(name, opts) {
    if (skip()) return;
    var body = JSON.stringify({
      n: name, u: l.href, d: site, r: d.referrer || null, w: w.innerWidth,
      p: opts && opts.props ? opts.props : undefined
    });
    if (!(navigator.sendBeacon && navigator.sendBeacon(api, new Blob([body], { type: "text/plain" })))) {
      fetch(api, { method: "POST", body: body, keepalive: true, headers: { "Content-Type": "text/plain" } })
        .catch(function () {});
    }
    if (opts && opts.callback) opts.callback();
  }

  function pageview() {
    var here = l.pathname + (hash ? l.hash : "");
    if (here === last) return;
    last = here;
    send("pageview");
  }

  var queued = (w.tally && w.tally.q) || [];
  w.tally = function (name, opts) { send(name, opts); };
  for (var i = 0; i < queued.length; i++) w.tally.apply(this, queued[i]);

  var h = w.history;
  if (h.pushState) {
    var push = h.pushState;
    h.pushState = function () { push.apply(this, arguments); pageview(); };
    var replace = h.replaceState;
    h.replaceState = function () { replace.apply(this, arguments); pageview(); };
    w.addEventListener("popstate", pageview);
  }
  if (hash) w.addEventListener("hashchange", pageview);

  function link(event) {
    var a = event.target.closest && event.target.closest("a[href]");
    if (!a) return;
    if (s.hasAttribute("data-outbound") && a.host && a.host !== l.host) send("Outbound Link: Click", { props: { url: a.href } });
    else if (s.hasAttribute("data-downloads") && /\.(pdf|zip|dmg|exe|docx?|xlsx?|pptx?|csv|mp[34]|tar|gz)$/i.test(a.pathname))
      send("File Download", { props: { url: a.href } });
  }
  d.addEventListener("click", link);
  d.addEventListener("auxclick", link);

  if (d.visibilityState === "prerender") {
    d.addEventListener("visibilitychange", function once() {
      if (d.visibilityState === "visible") { d.removeEventListener("visibilitychange", once); pageview(); }
    });
  } else pageview();
})();
