dofile(os.getenv("BENCH_DIR") .. "/wrk/common.lua")
wrk.headers["Authorization"] = nil
local body = string.format('{"email":"%s","password":"%s"}', os.getenv("BENCH_EMAIL"),
                           os.getenv("BENCH_PASSWORD"))
request = function()
  return wrk.format("POST", "/api/v1/auth/login", nil, body)
end
