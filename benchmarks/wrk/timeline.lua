-- GET /contacts/{BENCH_CONTACT}/timeline?limit=20, from BENCH_CURSOR when set (benchmarks/timeline).
token = os.getenv("BENCH_TOKEN")
wrk.headers["Authorization"] = "Bearer " .. token
local path = "/api/v1/contacts/" .. os.getenv("BENCH_CONTACT") .. "/timeline?limit=20"
local cursor = os.getenv("BENCH_CURSOR") or ""
if cursor ~= "" then path = path .. "&cursor=" .. cursor end
request = function()
  return wrk.format("GET", path)
end
