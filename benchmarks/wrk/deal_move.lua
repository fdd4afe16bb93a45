-- A random deal moved to a random open stage of its pipeline (durable: stage, history row).
dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
local first = tonumber(os.getenv("BENCH_DEAL_FIRST"))
local last = tonumber(os.getenv("BENCH_DEAL_LAST"))
local stages = {}
for s in string.gmatch(os.getenv("BENCH_STAGES"), "%d+") do stages[#stages + 1] = s end
request = function()
  local body = '{"stage_id":' .. stages[math.random(#stages)] .. '}'
  return wrk.format("POST", "/api/v1/deals/" .. math.random(first, last) .. "/move", nil, body)
end
