-- Realistic page views for the collector benchmark: a user-agent mix with a long tail the
-- collector's cache has never seen, paths with a few popular pages, referrers and UTM tags
-- on some, client IPs varied (IPv4 and IPv6) and a sender's event_id on each.
-- Loaded by single_event.lua and batch.lua (dofile), which define `request`; seeded per wrk thread.

local traffic = {}

local COMMON_USER_AGENTS = {
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36",
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:133.0) Gecko/20100101 Firefox/133.0",
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
  "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1.1 Mobile/15E148 Safari/604.1",
  "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
  "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
  "Mozilla/5.0 (iPad; CPU OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
  "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
  "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
  "Mozilla/5.0 (Linux; Android 13; SM-X200) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36",
  "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0",
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/115.0.0.0",
}
-- The long tail: app webviews and device builds, nearly every one new to the collector.
local DEVICES = {"SM-A546B", "SM-G991B", "Pixel 8", "Pixel 7a", "M2101K6G", "CPH2451", "2201117TY",
  "moto g(60)", "RMX3630", "V2202", "SM-A145F", "23053RN02Y", "Infinix X6831", "TECNO KI5k"}
local PATHS = {"/", "/", "/", "/pricing", "/blog", "/docs", "/about", "/signup", "/blog/kafka-at-home",
  "/docs/api", "/docs/getting-started", "/blog/why-self-host", "/changelog", "/contact", "/careers"}
local REFERRERS = {"", "", "", "", "https://www.google.com/", "https://www.google.com/", "https://t.co/x1",
  "https://news.ycombinator.com/", "https://duckduckgo.com/", "https://www.reddit.com/r/selfhosted/"}
local UTM = {"", "", "", "", "", "", "", "?utm_source=newsletter&utm_medium=email&utm_campaign=launch",
  "?ref=producthunt", "?utm_source=twitter&utm_medium=social"}
local WIDTHS = {390, 412, 1440, 1920, 1366, 1536, 820, 375}

function traffic.seed(id)
  math.randomseed(os.time() * 1000 + (id or 0))
end

local function pick(list)
  return list[math.random(#list)]
end

function traffic.user_agent()
  if math.random() < 0.9 then
    return pick(COMMON_USER_AGENTS)
  end
  return string.format("Mozilla/5.0 (Linux; Android %d; %s Build/%s.%06d) AppleWebKit/537.36 (KHTML, like Gecko) " ..
    "Version/4.0 Chrome/%d.0.%d.%d Mobile Safari/537.36 [FBAN/EMA;FBAV/%d.0.0.%d.%d;]",
    math.random(10, 15), pick(DEVICES), pick({"TP1A", "UP1A", "AP2A"}), math.random(0, 999999),
    math.random(118, 131), math.random(5000, 6800), math.random(1, 200), math.random(300, 500),
    math.random(1, 99), math.random(1, 999))
end

function traffic.client_ip()
  if math.random() < 0.8 then
    return string.format("%d.%d.%d.%d", math.random(1, 223), math.random(0, 255), math.random(0, 255),
      math.random(1, 254))
  end
  return string.format("2001:db8:%x:%x::%x", math.random(0, 65535), math.random(0, 65535), math.random(1, 65535))
end

function traffic.event_id()
  return string.format("%08x-%04x-4%03x-%04x-%06x%06x", math.random(0, 0x7fffffff), math.random(0, 0xffff),
    math.random(0, 0xfff), 0x8000 + math.random(0, 0x3fff), math.random(0, 0xffffff), math.random(0, 0xffffff))
end

-- One event's JSON fields (without braces) as tracker.js sends them, for `site`.
function traffic.pageview_fields(site)
  return string.format('"n":"pageview","d":"%s","u":"https://%s%s%s","r":"%s","w":%d,"i":"%s"',
    site, site, pick(PATHS), pick(UTM), pick(REFERRERS), pick(WIDTHS), traffic.event_id())
end

function traffic.report(summary, latency)
  io.write(string.format('BENCH {"requests":%d,"duration_us":%d,"non_2xx":%d,"errors":%d,' ..
    '"p50_us":%d,"p99_us":%d}\n', summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end

-- wrk's hooks, the same for every script that loads this file (which defines `request`).
function setup(thread)
  thread:set("id", math.random(1, 1000000))
end

function init(args)
  traffic.seed(id)
end

function done(summary, latency, requests)
  traffic.report(summary, latency)
end

return traffic
