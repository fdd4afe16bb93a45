-- The flooding tenant of benchmarks/flood, as fast as wrk goes: creates and updates (PATCH of
-- the status), half each, every request by one of the tenant's users at random.
-- BENCH_TOKENS: comma-separated access tokens of the users; BENCH_FIRST_ID..BENCH_LAST_ID: the
-- tenant's contacts.
local users = {}
for t in string.gmatch(os.getenv("BENCH_TOKENS"), "[^,]+") do
  users[#users + 1] = {["Authorization"] = "Bearer " .. t, ["Content-Type"] = "application/json"}
end
local first_id = tonumber(os.getenv("BENCH_FIRST_ID"))
local last_id = tonumber(os.getenv("BENCH_LAST_ID"))
local statuses = {"active", "inactive", "qualified", "unqualified"}
local started = os.time()
local n = 0
request = function()
  local headers = users[math.random(#users)]
  n = n + 1
  if n % 2 == 0 then
    local body = string.format(
      '{"first_name":"Flood","last_name":"Writer","email":"f%d-%d-%d@flood.example","status":"active"}',
      thread_no or 0, n, started)
    return wrk.format("POST", "/api/v1/contacts", headers, body)
  end
  local body = '{"status":"' .. statuses[math.random(#statuses)] .. '"}'
  return wrk.format("PATCH", "/api/v1/contacts/" .. math.random(first_id, last_id), headers, body)
end
dofile(os.getenv("BENCH_DIR") .. "/wrk/harness.lua")
