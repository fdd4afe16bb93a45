-- 80 % reads (GET by id) and 20 % writes (PATCH status) spread over several tenants.
-- BENCH_TOKENS: comma-separated access tokens; BENCH_RANGES: "first:last" id ranges, same order.
-- BENCH_WRITE_PERCENT: the share of writes (20 unless set).
local tokens, ranges = {}, {}
for t in string.gmatch(os.getenv("BENCH_TOKENS"), "[^,]+") do tokens[#tokens + 1] = t end
for a, b in string.gmatch(os.getenv("BENCH_RANGES"), "(%d+):(%d+)") do
  ranges[#ranges + 1] = {tonumber(a), tonumber(b)}
end
local reads = 100 - tonumber(os.getenv("BENCH_WRITE_PERCENT") or "20")
local statuses = {"active", "inactive", "qualified", "unqualified"}
wrk.headers["Content-Type"] = "application/json"
request = function()
  local i = math.random(#tokens)
  local id = math.random(ranges[i][1], ranges[i][2])
  local headers = {["Authorization"] = "Bearer " .. tokens[i]}
  if math.random(100) <= reads then
    return wrk.format("GET", "/api/v1/contacts/" .. id, headers)
  end
  local body = '{"status":"' .. statuses[math.random(#statuses)] .. '"}'
  return wrk.format("PATCH", "/api/v1/contacts/" .. id, headers, body)
end
