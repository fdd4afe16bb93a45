-- Shared by the scenarios: the bearer token and the id range come from environment variables
-- that benchmarks/run sets.
token = os.getenv("BENCH_TOKEN")
first_id = tonumber(os.getenv("BENCH_FIRST_ID") or "1")
last_id = tonumber(os.getenv("BENCH_LAST_ID") or "1")
wrk.headers["Authorization"] = "Bearer " .. token
wrk.headers["Content-Type"] = "application/json"

function random_id()
  return math.random(first_id, last_id)
end
