-- One page view per request, from a different client IP each time (so no client is rate limited).
local site = os.getenv("BENCH_SITE") or "bench.example.com"
local paths = {"/", "/pricing", "/blog", "/docs", "/about", "/signup", "/blog/kafka-at-home", "/docs/api"}
local counter = 0

request = function()
  counter = counter + 1
  local body = string.format('{"n":"pageview","d":"%s","u":"https://%s%s","w":1440}',
    site, site, paths[(counter % #paths) + 1])
  local headers = {
    ["Content-Type"] = "text/plain",
    ["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
    ["X-Forwarded-For"] = string.format("10.%d.%d.%d", math.random(0, 255), math.random(0, 255), math.random(1, 254)),
  }
  return wrk.format("POST", "/api/event", headers, body)
end

done = function(summary, latency, requests)
  io.write(string.format('BENCH {"requests":%d,"duration_us":%d,"non_2xx":%d,"errors":%d,' ..
    '"p50_us":%d,"p99_us":%d}\n', summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
