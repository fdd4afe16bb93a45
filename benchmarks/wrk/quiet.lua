-- The quiet tenant of benchmarks/flood: 80 % GET of one of its contacts, 20 % POST of a new
-- contact, paced to BENCH_RATE requests/s (wrk/harness.lua).
dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
local started = os.time()
local n = 0
request = function()
  if math.random(100) <= 80 then
    return wrk.format("GET", "/api/v1/contacts/" .. random_id())
  end
  n = n + 1
  local body = string.format(
    '{"first_name":"Quiet","last_name":"Writer","email":"q%d-%d-%d@quiet.example","status":"active"}',
    thread_no or 0, n, started)
  return wrk.format("POST", "/api/v1/contacts", nil, body)
end
dofile(os.getenv("BENCH_DIR") .. "/wrk/harness.lua")
