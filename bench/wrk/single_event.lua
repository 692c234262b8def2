-- One page view per request to /api/event, as tracker.js sends it, through a trusted proxy
-- (X-Forwarded-For from loopback) so that each request comes from another client.
local traffic = dofile(os.getenv("BENCH_WRK_DIR") .. "/traffic.lua")
local site = os.getenv("BENCH_SITE") or "bench.example.com"

function request()
  local headers = {
    ["Content-Type"] = "text/plain",
    ["User-Agent"] = traffic.user_agent(),
    ["Accept-Language"] = "en-GB,en;q=0.9",
    ["X-Forwarded-For"] = traffic.client_ip(),
  }
  return wrk.format("POST", "/api/event", headers, "{" .. traffic.pageview_fields(site) .. "}")
end
