dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
-- GET /contacts with one group's filters (status and tag): the list filter_search is compared with.
local statuses = {"active", "inactive", "qualified", "unqualified"}
local tags = {"vip", "new", "cardio", "lab", "follow-up"}
request = function()
  return wrk.format("GET", string.format("/api/v1/contacts?per_page=20&page=%d&status=%s&tag=%s",
    math.random(1, 20), statuses[math.random(#statuses)], tags[math.random(#tags)]))
end
