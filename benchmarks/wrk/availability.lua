dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
local path = string.format("/api/v1/availability?service_id=%s&from=%s&to=%s",
  os.getenv("BENCH_SERVICE"), os.getenv("BENCH_FROM"), os.getenv("BENCH_TO"))
request = function()
  return wrk.format("GET", path)
end
