-- The board of a pipeline of BENCH_DEALS deals: per stage count, sums and the first 20 deals.
dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
local path = "/api/v1/pipelines/" .. os.getenv("BENCH_PIPELINE") .. "/board"
request = function()
  return wrk.format("GET", path)
end
