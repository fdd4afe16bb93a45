dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
-- Each thread gets its own number (a global in its own Lua state) so e-mails never collide.
local counter = 0
setup = function(thread)
  counter = counter + 1
  thread:set("thread_no", counter)
end
local n = 0
request = function()
  n = n + 1
  local body = string.format(
    '{"first_name":"Bench","last_name":"Writer","email":"w%d-%d-%d@bench.example","status":"active"}',
    thread_no or 0, n, os.time())
  return wrk.format("POST", "/api/v1/contacts", nil, body)
end
