// Tally's tracking snippet: the readable source of collector/tracker.js.
//
// Every visitor of every tracked site downloads the built file, so it must stay within 1.5 KiB
// gzipped with the Web Vitals (tests/unit/test_tracker_size.py). `make tracker` builds it with the terser pinned in
// package-lock.json and the options in terser.json; tests/unit/test_tracker_build.py checks that
// the committed file is that build. Never edit collector/tracker.js by hand.
//
// Written for the minifier: one arrow function taking window, document, location and the script
// element as parameters (terser shortens each to one letter), every variable a `let` (terser joins
// declarations of one kind only), and `==` where it gives the same answer as `===` (terser
// loosens a comparison itself only when it knows both sides' types; each byte counts). The
// JSON field names are the collector's short names (Plausible's Events API: n, u, d, r, w, p; ours:
// h, i, $, sd, e, lcp, cls, inp, fcp, ttfb), the event contract of /api/event (collector/payload.py): keep them.
//
// Privacy: no cookie, no storage written, nothing that identifies a visitor is sent: the
// collector derives a daily visitor id from the request itself.
((window, document, location, script) => {
  let // The page (path, and hash when hash routes are pages) of the last page view sent.
    lastPage,
    // When the page last became visible (ms since the epoch); 0 while it is hidden.
    visibleSince,
    // The deepest point of the page seen since its page view, in percent, and the depth last sent
    // in an engagement event (-1: none yet, so the first one is sent even at depth 0).
    scrollDepth,
    sentDepth,
    // The URL of the page view that engagement is measured for: on a client-side navigation
    // location already holds the next page when its predecessor's engagement is sent.
    engagedUrl,
    // The script tag's data-* attributes (data-site, data-api, data-hash, data-outbound,
    // data-downloads, data-allow-local): an option is on when its attribute is present;
    // data-vitals="false" is the one that is on unless it says so.
    options = script.dataset,
    // The page load's Web Vitals measured so far, by their short names (ms; CLS unitless), sent
    // once: with the page view's first engagement event, after which this is 0 and no later
    // measurement is kept (a client-side navigation has no vitals of its own).
    vitals = options.vitals != "false" && {},
    // Keeps a measurement, unless the collector would refuse it (2 minutes at most: a page
    // loaded in a background tab can report a time that is no load's).
    measure = (name, value) => vitals && value < 12e4 && (vitals[name] = value),
    // CLS: the largest burst of unexpected layout shifts, each burst of shifts less than 1 s
    // apart and at most 5 s long (web.dev's session windows); shifts right after an input are
    // expected ones.
    shiftsFrom = 0,
    lastShift = 0,
    burst = 0,
    // Calls made before the snippet loaded, by the documented stub
    // `window.tally=window.tally||function(){(tally.q=tally.q||[]).push(arguments)}`.
    queued = window.tally?.q || [],
    endpoint = options.api || new URL("/api/event", script.src).href,
    // Time the page was visible since its last engagement event, in ms.
    engagedMs = 0,
    listen = (target, type, handler) => target.addEventListener(type, handler),
    // tally(name, {props, revenue, callback}): the public API, page views and engagement too
    // (`x` carries fields of the body that only the tracker itself sets).
    track = (name, call = {}) => {
      let ignored,
        props = call.props;
      // A visitor opts out on their own browser; storage may throw (disabled, sandboxed frame).
      // Stored values are strings (or undefined): `==` is `===` here.
      try {
        ignored = localStorage.tally_ignore == "true";
      } catch {}
      // Visits from the developer's own machine (localhost, loopback, a file: page's empty
      // hostname) and from automated browsers (navigator.webdriver) are not counted, as
      // Plausible's tracker does, unless data-allow-local asks for them (tests, staging).
      if (
        !ignored &&
        ("allowLocal" in options ||
          !(/^(localhost|127[\d.]+|\[::1\]|)$/.test(location.hostname) || navigator.webdriver))
      )
        post(
          JSON.stringify(
            {
              n: name,
              u: location.href,
              d: options.site || location.hostname,
              r: document.referrer,
              w: window.innerWidth,
              p: props,
              $: call.revenue,
              h: "hash" in options,
              // The event's own id, so that a retried send is counted once: the random v4 UUID
              // that ends a fresh blob URL. Every browser makes one in any context, where
              // crypto.randomUUID() needs a secure one (an http page), in fewer bytes than a
              // generator; the empty blob lives until the page goes.
              i: URL.createObjectURL(new Blob()).slice(-36),
              ...call.x,
            },
            // Property values go as strings (the collector takes a flat map of strings, as
            // Plausible's does): the replacer sees the props object as `this` of its values
            // (`==` compares two objects, or an object with undefined: as `===` would).
            function (key, value) {
              return this == props ? "" + value : value;
            },
          ),
          0,
        );
      call.callback?.();
    },
    // fetch with keepalive, not sendBeacon: the send outlives the page and its answer is seen.
    // A send that fails on the network, or is answered 408 or 503 (what a retry cannot make
    // worse; a 429 or 400 is final) is sent again with the same body, so the same event id,
    // after 1 s and then 4 s. Among HTTP statuses, status % 95 == 28 holds for 408 and 503 only:
    // the shortest test for the two, to stay within 1 KiB.
    post = (body, attempt) =>
      fetch(endpoint, { method: "POST", body, keepalive: true })
        .then((response) => {
          if (response.status % 95 === 28) throw 0;
        })
        .catch(() => attempt < 2 && setTimeout(post, 1000 << (2 * attempt), body, attempt + 1)),
    // The deepest point seen: the bottom of the viewport over the document's height, in percent.
    measureScroll = () => {
      scrollDepth = Math.max(
        scrollDepth,
        Math.min(100, ((100 * (scrollY + innerHeight)) / document.body.scrollHeight) | 0),
      );
    },
    // Plausible's engagement event: sent when the page is hidden, left or replaced by a
    // client-side navigation, if there is new engaged time or a deeper point; the time then
    // counts from zero again (the collector adds the events up).
    sendEngagement = () => {
      if (visibleSince) {
        engagedMs += Date.now() - visibleSince;
        visibleSince = 0;
      }
      if (engagedUrl && (engagedMs || scrollDepth > sentDepth)) {
        sentDepth = scrollDepth;
        track("engagement", { x: { u: engagedUrl, sd: scrollDepth, e: engagedMs, ...vitals } });
        engagedMs = vitals = 0;
      }
    },
    // A page view on load and on each new page of a single-page app; the same page again (a
    // replaceState of query or state only, a hash change without data-hash) is not one.
    trackPage = () => {
      let page = location.pathname + ("hash" in options ? location.hash : "");
      if (page != lastPage) {
        lastPage = page;
        sendEngagement();
        track("pageview");
        engagedUrl = location.href;
        engagedMs = scrollDepth = 0;
        sentDepth = -1;
        visibleSince = Date.now();
        measureScroll();
      }
    },
    // data-outbound and data-downloads: clicks (left or middle button) on links to another host
    // and on links to files, named as Plausible names these events.
    trackClick = (event) => {
      let link = event.target.closest("a"),
        name =
          link &&
          event.button < 2 &&
          ("outbound" in options && link.host && link.host != location.host
            ? "Outbound Link: Click"
            : "downloads" in options &&
              /\.(pdf|(doc|xls|ppt)x?|csv|zip|gz|dmg|pkg|exe|msi|apk|mp[34])$/i.test(link.pathname) &&
              "File Download");
      if (name) track(name, { props: { url: link.href } });
    };

  // Web Vitals from the browser's own performance timeline (no library); `buffered` delivers
  // what happened before the snippet ran. A browser without an entry type throws: that vital
  // is then not measured (absent, not 0). LCP: the last largest paint; FCP: the first
  // contentful paint; TTFB: the navigation's first response byte; INP: the longest interaction
  // (what INP is for pages with fewer than 50 interactions, most of them). While `vitals` is
  // 0 or false (sent, or turned off), `vitals.x` reads undefined and measure keeps nothing.
  for (let [type, handle] of [
    ["largest-contentful-paint", (entry) => measure("lcp", entry.startTime)],
    ["paint", (entry) => entry.name == "first-contentful-paint" && measure("fcp", entry.startTime)],
    ["navigation", (entry) => measure("ttfb", entry.responseStart)],
    ["event", (entry) => entry.interactionId && measure("inp", Math.max(entry.duration, vitals.inp || 0))],
    [
      "layout-shift",
      (entry) => {
        if (!entry.hadRecentInput) {
          if (entry.startTime - lastShift > 1e3 || entry.startTime - shiftsFrom > 5e3) {
            shiftsFrom = entry.startTime;
            burst = 0;
          }
          lastShift = entry.startTime;
          measure("cls", Math.max((burst += entry.value), vitals.cls || 0));
        }
      },
    ],
  ])
    try {
      new PerformanceObserver((list) => list.getEntries().forEach(handle)).observe({
        type,
        buffered: true,
        durationThreshold: 40,
      });
    } catch {}
  // Client-side navigation: a single-page app changes the page through the history API.
  for (let method of ["pushState", "replaceState"]) {
    let original = history[method];
    history[method] = function () {
      original.apply(this, arguments);
      trackPage();
    };
  }
  listen(window, "popstate", trackPage);
  listen(window, "hashchange", trackPage);
  listen(document, "click", trackClick);
  listen(document, "auxclick", trackClick);
  listen(document, "scroll", measureScroll);
  // Engaged time counts while the page is visible only.
  listen(document, "visibilitychange", () => (document.hidden ? sendEngagement() : (visibleSince ||= Date.now())));
  listen(window, "pagehide", sendEngagement);
  // A page prerendered by the browser is counted when, and only if, the visitor sees it.
  if (document.prerendering) listen(document, "prerenderingchange", trackPage);
  else trackPage();
  window.tally = track;
  for (let call of queued) track(...call);
})(window, document, location, document.currentScript);
