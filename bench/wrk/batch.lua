-- A batch of BENCH_BATCH page views per request to /api/events (server-side sender).
local site = os.getenv("BENCH_SITE") or "bench.example.com"
local size = tonumber(os.getenv("BENCH_BATCH") or "100")
local key = os.getenv("BENCH_INGEST_KEY") or ""
local events = {}
for i = 1, size do
  events[i] = string.format('{"n":"pageview","site":"%s","url":"https://%s/p/%d","ip":"10.1.%d.%d",' ..
    '"user_agent":"Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"}',
    site, site, i % 20, math.floor(i / 250) % 256, 1 + i % 250)
end
wrk.method = "POST"
wrk.path = "/api/events"
wrk.body = "[" .. table.concat(events, ",") .. "]"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. key

done = function(summary, latency, requests)
  io.write(string.format('BENCH {"requests":%d,"duration_us":%d,"non_2xx":%d,"errors":%d,' ..
    '"p50_us":%d,"p99_us":%d}\n', summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
