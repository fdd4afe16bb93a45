dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
local terms = {"ann", "smith", "MAR", "lee", "+4930", "example.org", "jo", "berg", "nguyen",
               "tom", "kim", "00042", "ria", "müller", "son"}
-- BENCH_SEARCH_TERM: that term alone (benchmarks/profile list, each term's own rate).
local only = os.getenv("BENCH_SEARCH_TERM")
if only and only ~= "" then terms = {only} end
request = function()
  return wrk.format("GET", "/api/v1/contacts?per_page=20&search=" .. terms[math.random(#terms)])
end
