-- Loaded last (dofile) by the scenarios of benchmarks/flood and benchmarks/soak; wraps the
-- scenario's own setup, init and response. It gives:
--  * thread_no: each thread's number (1, 2, ...), and a random seed of its own (math.random
--    would otherwise give every thread the same sequence);
--  * pacing: with BENCH_RATE > 0, BENCH_RATE requests per second in all, shared evenly by the
--    BENCH_WRK_THREADS threads (pass wrk's -t). Each thread hands out send times 1/rate apart
--    and a connection waits (wrk's delay()) for the next free one, so the rate holds whatever the
--    latency, as long as there are connections enough. A thread more than a second behind its
--    schedule (a stall) drops the sends it missed rather than catch up in a burst: the achieved
--    rate shows the stall. Unset or 0: as fast as wrk goes;
--  * the report: when wrk ends, the file BENCH_REPORT gets one figure a line, read by
--    benchmarks/wrk_report.py: "requests N", "duration_us N", "socket KIND N" (connect, read,
--    write, timeout), "status CODE N" (answers by HTTP status, counted by every thread),
--    "latency MICROSECONDS COUNT" (the histogram wrk's own percentiles come from).
local harness_threads = {}
local scenario_setup, scenario_init, scenario_response = setup, init, response

setup = function(thread)
  harness_threads[#harness_threads + 1] = thread
  thread:set("thread_no", #harness_threads)
  if scenario_setup then scenario_setup(thread) end
end

init = function(args)
  math.randomseed((thread_no or 0) * 7919 + os.time())
  if scenario_init then scenario_init(args) end
end

status_counts = {}
response = function(status, headers, body)
  status_counts[status] = (status_counts[status] or 0) + 1
  if scenario_response then scenario_response(status, headers, body) end
end

local rate = tonumber(os.getenv("BENCH_RATE") or "0")
if rate > 0 then
  local ffi = require("ffi")
  pcall(ffi.cdef, [[
    typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
    int clock_gettime(int clock_id, bench_timespec *tp);
  ]])
  local ts = ffi.new("bench_timespec")
  local function now_ms()
    ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
  end
  local interval = 1000 * tonumber(os.getenv("BENCH_WRK_THREADS") or "1") / rate
  local next_at
  delay = function()
    local now = now_ms()
    if not next_at or now - next_at > 1000 then next_at = now end
    local wait = next_at - now
    next_at = next_at + interval
    if wait < 1 then return 0 end
    return math.floor(wait)
  end
end

done = function(summary, latency, requests)
  local path = os.getenv("BENCH_REPORT")
  if not path then return end
  local f = assert(io.open(path, "w"))
  f:write(string.format("requests %d\nduration_us %d\n", summary.requests, summary.duration))
  for _, kind in ipairs({"connect", "read", "write", "timeout"}) do
    f:write(string.format("socket %s %d\n", kind, summary.errors[kind]))
  end
  local totals = {}
  for _, thread in ipairs(harness_threads) do
    for code, n in pairs(thread:get("status_counts") or {}) do
      totals[code] = (totals[code] or 0) + n
    end
  end
  for code, n in pairs(totals) do f:write(string.format("status %d %d\n", code, n)) end
  for i = 1, #latency do
    local value, count = latency(i)
    f:write(string.format("latency %d %d\n", value, count))
  end
  f:close()
end
