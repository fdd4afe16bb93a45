-- The board of a pipeline of BENCH_DEALS deals: per stage count, sums and the first deals
-- (BENCH_BOARD_QUERY, e.g. "?per_stage=5", varies the page for profiling).
dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
local path = "/api/v1/pipelines/" .. os.getenv("BENCH_PIPELINE") .. "/board" ..
  (os.getenv("BENCH_BOARD_QUERY") or "")
request = function()
  return wrk.format("GET", path)
end
