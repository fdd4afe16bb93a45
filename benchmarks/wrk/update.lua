dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
local statuses = {"active", "inactive", "qualified", "unqualified"}
request = function()
  local body = '{"status":"' .. statuses[math.random(#statuses)] .. '"}'
  return wrk.format("PATCH", "/api/v1/contacts/" .. random_id(), nil, body)
end
