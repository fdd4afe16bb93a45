-- benchmarks/cluster: GET by id of one tenant's contacts (get.lua), with the harness's report.
dofile(os.getenv("BENCH_DIR") .. "/wrk/get.lua")
dofile(os.getenv("BENCH_DIR") .. "/wrk/harness.lua")
