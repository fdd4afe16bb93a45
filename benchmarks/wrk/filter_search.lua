dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
-- POST /contacts/search with two groups (issue #35): (status AND tag) OR (source AND tag).
local statuses = {"active", "inactive", "qualified", "unqualified"}
local tags = {"vip", "new", "cardio", "lab", "follow-up"}
local sources = {"website", "referral", "ads", "manual"}
request = function()
  local body = string.format(
    '{"filter_groups":[{"filters":[{"field":"status","op":"eq","value":"%s"},' ..
    '{"field":"tag","op":"eq","value":"%s"}]},{"filters":[{"field":"source","op":"eq",' ..
    '"value":"%s"},{"field":"tag","op":"eq","value":"%s"}]}],"per_page":20,"page":%d}',
    statuses[math.random(#statuses)], tags[math.random(#tags)], sources[math.random(#sources)],
    tags[math.random(#tags)], math.random(1, 20))
  return wrk.format("POST", "/api/v1/contacts/search", nil, body)
end
