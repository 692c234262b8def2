-- BENCH_BATCH page views per request to /api/events, as a server-side sender posts them:
-- each with its visitor's IP and user agent, a time a little in the past and its event_id.
local traffic = dofile(os.getenv("BENCH_WRK_DIR") .. "/traffic.lua")
local site = os.getenv("BENCH_SITE") or "bench.example.com"
local size = tonumber(os.getenv("BENCH_BATCH") or "100")
local key = os.getenv("BENCH_INGEST_KEY") or ""

function request()
  local now_ms = os.time() * 1000
  local events = {}
  for i = 1, size do
    events[i] = string.format('{%s,"ip":"%s","user_agent":"%s","ts":%d}', traffic.pageview_fields(site),
      traffic.client_ip(), traffic.user_agent(), now_ms - math.random(0, 60000))
  end
  local headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key}
  return wrk.format("POST", "/api/events", headers, "[" .. table.concat(events, ",") .. "]")
end
