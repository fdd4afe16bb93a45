-- benchmarks/cluster: 80 % reads, 20 % writes over several tenants (mixed.lua), with the
-- harness's report.
dofile(os.getenv("BENCH_DIR") .. "/wrk/mixed.lua")
dofile(os.getenv("BENCH_DIR") .. "/wrk/harness.lua")
