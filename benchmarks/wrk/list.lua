dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
request = function()
  return wrk.format("GET", "/api/v1/contacts?per_page=20&page=" .. math.random(1, 500))
end
