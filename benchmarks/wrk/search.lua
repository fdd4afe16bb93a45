dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
local terms = {"ann", "smith", "MAR", "lee", "+4930", "example.org", "jo", "berg", "nguyen",
               "tom", "kim", "00042", "ria", "müller", "son"}
request = function()
  return wrk.format("GET", "/api/v1/contacts?per_page=20&search=" .. terms[math.random(#terms)])
end
