-- Bookings over BENCH_CALENDARS, never twice the same slot: booking i of thread t takes calendar
-- (i * threads + t) mod n and the 5-minute slot (i * threads + t) div n from BENCH_BASE.
dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
local calendars = {}
for id in string.gmatch(os.getenv("BENCH_CALENDARS"), "%d+") do calendars[#calendars + 1] = id end
local service, contact = os.getenv("BENCH_SERVICE"), os.getenv("BENCH_CONTACT")
local base = tonumber(os.getenv("BENCH_BASE"))
local threads = tonumber(os.getenv("BENCH_THREADS") or "2")
local counter = 0
setup = function(thread)
  thread:set("thread_no", counter)
  counter = counter + 1
end
local i = 0
request = function()
  local k = i * threads + (thread_no or 0)
  i = i + 1
  local cal = calendars[(k % #calendars) + 1]
  local start = os.date("!%Y-%m-%dT%H:%M:%SZ", base + math.floor(k / #calendars) * 300)
  local body = string.format(
    '{"contact_id":%s,"service_id":%s,"calendar_id":%s,"start":"%s"}', contact, service, cal, start)
  return wrk.format("POST", "/api/v1/appointments", nil, body)
end
