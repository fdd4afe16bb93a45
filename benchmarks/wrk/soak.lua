-- The workload of benchmarks/soak, over several tenants (BENCH_TOKENS: comma-separated access
-- tokens; BENCH_RANGES: "first:last" contact id ranges, same order): 60 % GET of a contact,
-- 15 % search, 15 % PATCH of the status, 10 % new contacts: a create or, once this thread holds
-- 16 contacts it created, the DELETE of the oldest of them, so that the data set keeps its size
-- over a long run and a growing memory means something. Paced with BENCH_RATE (wrk/harness.lua).
local tenants = {}
for t in string.gmatch(os.getenv("BENCH_TOKENS"), "[^,]+") do
  tenants[#tenants + 1] = {headers = {["Authorization"] = "Bearer " .. t,
                                      ["Content-Type"] = "application/json"}}
end
local i = 0
for a, b in string.gmatch(os.getenv("BENCH_RANGES"), "(%d+):(%d+)") do
  i = i + 1
  tenants[i].first, tenants[i].last = tonumber(a), tonumber(b)
end
local statuses = {"active", "inactive", "qualified", "unqualified"}
local terms = {"ann", "smith", "MAR", "lee", "+4930", "example.org", "jo", "berg", "nguyen",
               "tom", "kim", "00042", "ria", "müller", "son"}
local started = os.time()
local n = 0
-- The contacts this thread created and has not deleted yet, oldest first: {tenant, id}.
local held, head, tail = {}, 1, 0

request = function()
  local k = math.random(#tenants)
  local t = tenants[k]
  local roll = math.random(100)
  if roll <= 60 then
    return wrk.format("GET", "/api/v1/contacts/" .. math.random(t.first, t.last), t.headers)
  elseif roll <= 75 then
    return wrk.format("GET", "/api/v1/contacts?per_page=20&search=" .. terms[math.random(#terms)],
                      t.headers)
  elseif roll <= 90 then
    local body = '{"status":"' .. statuses[math.random(#statuses)] .. '"}'
    return wrk.format("PATCH", "/api/v1/contacts/" .. math.random(t.first, t.last), t.headers, body)
  end
  if tail - head + 1 >= 16 then
    local oldest = held[head]
    held[head] = nil
    head = head + 1
    return wrk.format("DELETE", "/api/v1/contacts/" .. oldest[2], tenants[oldest[1]].headers)
  end
  n = n + 1
  local body = string.format(
    '{"first_name":"Soak","last_name":"Writer","email":"s%d-%d-%d-%d@soak.example","status":"active"}',
    k, thread_no or 0, n, started)
  return wrk.format("POST", "/api/v1/contacts", t.headers, body)
end

-- A 201 is a create: remember its contact (the tenant is in the e-mail) for a later DELETE.
response = function(status, headers, body)
  if status ~= 201 then return end
  local id = string.match(body, '"id":(%d+)')
  local k = string.match(body, '"email":"s(%d+)%-')
  if id and k then
    tail = tail + 1
    held[tail] = {tonumber(k), id}
  end
end
dofile(os.getenv("BENCH_DIR") .. "/wrk/harness.lua")
