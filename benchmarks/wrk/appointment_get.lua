dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
request = function()
  return wrk.format("GET", "/api/v1/appointments/" .. random_id())
end
