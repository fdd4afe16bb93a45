# shellcheck shell=bash
# Helpers shared by benchmarks/run, benchmarks/flood and benchmarks/soak. Source it after setting
# BENCH_DIR (the benchmarks folder); it sources scripts/lib.sh:
#   BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
#   source "$BENCH_DIR/lib.sh"
#
# BENCH_NO_BUILD=1 skips the build and uses build/ as it is (when someone else is compiling).

# shellcheck source=scripts/lib.sh
source "$BENCH_DIR/../scripts/lib.sh"

# bench_build TARGET...: the Release build of the targets (crm_build release), or nothing with
# BENCH_NO_BUILD=1.
bench_build() {
  if [[ ${BENCH_NO_BUILD:-0} == 1 ]]; then
    crm_log "BENCH_NO_BUILD=1: not building, using build/ as it is"
    [[ -x $CRM_ROOT/build/carecrm ]] || crm_die "build/carecrm does not exist"
    return
  fi
  crm_build release "$@"
}

# bench_start NAME: a temporary directory (tmp), free ports (pg_port, redis_port, http_port,
# metrics_port), an EXIT trap that stops carecrm, the processes listed in bench_pids, Redis and
# PostgreSQL; then a throwaway PostgreSQL and Redis, the database and its migrations. Exports
# CARECRM_DATABASE_URL, CARECRM_REDIS_URL, a random CARECRM_JWT_SECRET and CARECRM_SECRET_KEYS;
# sets bin.
bench_start() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/carecrm-${1:?bench_start NAME}.XXXXXX")
  chmod 755 "$tmp"
  pg_port=$(free_port)
  redis_port=$(free_port)
  http_port=$(free_port)
  metrics_port=$(free_port)
  server_pid=""
  bench_pids=()
  trap bench_cleanup EXIT

  pg_start "$tmp/pg" "$pg_port"
  redis_start "$tmp/redis" "$redis_port"
  pg_ensure_db "$pg_port" carecrm
  export CARECRM_DATABASE_URL="postgresql://postgres@127.0.0.1:$pg_port/carecrm"
  export CARECRM_REDIS_URL="redis://127.0.0.1:$redis_port"
  CARECRM_JWT_SECRET=$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=')
  CARECRM_SECRET_KEYS="bench:$(head -c 32 /dev/urandom | base64)"
  export CARECRM_JWT_SECRET CARECRM_SECRET_KEYS
  bin="$CRM_ROOT/build/carecrm"
  "$bin" migrate >/dev/null
}

# Stops what bench_start started; BENCH_KEEP_TMP=1 keeps the temporary directory (the nodes' and
# servers' logs) for a look afterwards.
bench_cleanup() {
  local pid
  for pid in "${bench_pids[@]}" "$server_pid"; do
    [[ -n $pid ]] || continue
    if kill "$pid" 2>/dev/null; then wait "$pid" 2>/dev/null || true; fi
  done
  redis_stop "$tmp/redis" "$redis_port" || true
  pg_stop "$tmp/pg" || true
  if [[ ${BENCH_KEEP_TMP:-0} == 1 ]]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}

# bench_serve [FLAG...]: `carecrm serve` on http_port and metrics_port with the flags given
# (output in $tmp/serve.out and $tmp/serve.log); sets server_pid, waits until it listens.
bench_serve() {
  # Emptied here, before the background start: its own truncation happens in the child, later,
  # and a restart would otherwise find the previous server's "listening" line and load a port
  # that nothing listens on yet (what made the audit smoke fail now and then).
  : >"$tmp/serve.out"
  "$bin" serve --listen "127.0.0.1:$http_port" --metrics-listen "127.0.0.1:$metrics_port" "$@" \
    >"$tmp/serve.out" 2>"$tmp/serve.log" &
  server_pid=$!
  for _ in $(seq 1 300); do
    grep -q listening "$tmp/serve.out" 2>/dev/null && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  # Not serving after 30 s, or exited: say why (a load run against nothing fails silently).
  echo "carecrm serve $* is not listening; the end of its log:" >&2
  tail -n 20 "$tmp/serve.log" | sed 's/^/    /' >&2
  return 1
}

# The resident memory of carecrm in bytes (VmRSS of /proc/PID/status).
bench_rss() { awk '/^VmRSS/ {print $2 * 1024}' "/proc/$server_pid/status"; }

# bench_sample_rss PID: samples carecrm's resident memory every second while PID runs, keeping
# the largest in rss_max (set rss_max=0 first).
bench_sample_rss() {
  local r
  while kill -0 "$1" 2>/dev/null; do
    r=$(bench_rss)
    if ((r > rss_max)); then rss_max=$r; fi
    sleep 1
  done
}

# bench_mib BYTES: "123.4 MiB".
bench_mib() { awk -v x="$1" 'BEGIN { printf "%.1f MiB", x / 1048576 }'; }

# The machine, for the heading of a section of RESULTS.md: "2 cores, 24 GiB, 6.1.0-...".
bench_machine() {
  echo "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
}

# The CPU model ("AMD EPYC 7B13"), from /proc/cpuinfo.
bench_cpu_model() {
  awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo
}

# bench_wrk_start REPORT WRK_ARGS...: wrk in the background with a scenario that loads
# wrk/harness.lua, which writes its figures to REPORT (wrk's own output: REPORT.out). Sets
# wrk_pid (also kept in bench_pids for the EXIT trap until bench_wrk_wait).
bench_wrk_start() {
  local report=$1
  shift
  BENCH_REPORT=$report wrk "$@" >"$report.out" 2>&1 &
  wrk_pid=$!
  bench_pids+=("$wrk_pid")
}

# bench_wrk_wait PID REPORT: waits for that wrk, then evaluates `benchmarks/wrk_report.py REPORT`:
# W_REQUESTS, W_RPS, W_P50, W_P99, W_MAX (ms), W_2XX, W_429, W_503, W_5XX, W_OTHER, W_2XX_RPS,
# W_SOCKET, W_ERRORS (every answer that is not 2xx, plus the socket errors), W_CODES ("200:n ...").
bench_wrk_wait() {
  local pid=$1 report=$2 rc=0 kept=() p
  wait "$pid" || rc=$?
  for p in "${bench_pids[@]}"; do [[ $p == "$pid" ]] || kept+=("$p"); done
  bench_pids=("${kept[@]}")
  if ((rc != 0)) || [[ ! -s $report ]]; then
    cat "$report.out" >&2 || true
    crm_die "wrk failed (exit $rc, report $report)"
  fi
  eval "$(python3 "$BENCH_DIR/wrk_report.py" "$report")"
}

# bench_wrk REPORT WRK_ARGS...: bench_wrk_start, then bench_wrk_wait.
bench_wrk() {
  bench_wrk_start "$@"
  bench_wrk_wait "$wrk_pid" "$1"
}

# ratio VALUE BASE: VALUE ÷ BASE to two decimals ("n/a" when BASE is 0).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# ticks PID: the CPU clock ticks (user and system) PID has used; 0 once it is gone.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# CPU ticks of the PostgreSQL server and its current processes (backends stay for the run:
# carecrm's pool keeps its connections).
pg_ticks() {
  local pm total=0 pid
  pm=$(head -1 "$(find "$tmp/pg" -name postmaster.pid | head -1)")
  for pid in "$pm" $(pgrep -P "$pm"); do
    total=$((total + $(ticks "$pid" 2>/dev/null || echo 0)))
  done
  echo "$total"
}

# bench_token TENANT [USER] [ROLE]: an access token for that user of that tenant (default user
# TENANT, role admin), signed with CARECRM_JWT_SECRET, valid for an hour.
bench_token() {
  python3 - "$1" "${2:-$1}" "${3:-admin}" <<'PY'
import base64, hashlib, hmac, json, os, sys, time
tenant, user, role = int(sys.argv[1]), sys.argv[2], sys.argv[3]
secret = os.environ["CARECRM_JWT_SECRET"].encode()
def b64(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
now = int(time.time())
h = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
p = b64(json.dumps({"sub": user, "tid": tenant, "role": role, "typ": "access",
                    "sid": f"bench-{tenant}-{user}", "jti": f"j{tenant}-{user}", "iat": now,
                    "exp": now + 3600, "iss": "carecrm"}).encode())
s = b64(hmac.new(secret, f"{h}.{p}".encode(), hashlib.sha256).digest())
print(f"{h}.{p}.{s}")
PY
}

# sql TEXT: runs TEXT in the benchmark's database (after bench_start), unaligned, no headers.
sql() { psql -X -q -tA -h 127.0.0.1 -p "$pg_port" -U postgres carecrm -c "$1"; }

# With PG_STATEMENTS=1: pg_stat_statements loaded into the throwaway cluster, and the statements
# by total time printed after the load (statements_reset
# first, statements_report after; both do nothing without PG_STATEMENTS=1).
statements_on() {
  [[ ${PG_STATEMENTS:-0} == 1 ]] || return 0
  sql "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" >/dev/null
  pg_stop "$tmp/pg" >/dev/null
  pg_start "$tmp/pg" "$pg_port" >/dev/null
  sql "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
}
statements_reset() {
  [[ ${PG_STATEMENTS:-0} == 1 ]] || return 0
  sql "SELECT pg_stat_statements_reset()" >/dev/null
}
statements_report() {
  [[ ${PG_STATEMENTS:-0} == 1 ]] || return 0
  echo "statements by total time (pg_stat_statements):"
  sql "SELECT round(total_exec_time)::text || ' ms  ' || calls || ' calls  ' ||
         round((total_exec_time / calls * 1000)::numeric, 1) || ' us  ' || left(regexp_replace(query, '\s+', ' ', 'g'), 110)
       FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 12"
}

# bench_test_figures TITLE COMMAND PATTERN CTEST_ARGS...: runs scripts/test with CTEST_ARGS
# (pytest's output shown: -s), takes the last line of its output matching the extended regex
# PATTERN (the figures a test prints), prints it and appends it to RESULTS.md under "TITLE" with
# COMMAND and whether the test passed. Returns the test's exit status. For the measures that are
# a test's own run (benchmarks/rolling_restart, benchmarks/pg_failover).
bench_test_figures() {
  local title=$1 command=$2 pattern=$3
  shift 3
  local log status=0 line
  log=$(mktemp)
  PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} -s" "$CRM_ROOT/scripts/test" "$@" -V >"$log" 2>&1 || status=$?
  line=$(grep -E "$pattern" "$log" | tail -1 | sed -E 's/^[0-9]+: //' || true)
  echo "${line:-no figures: see $log}"
  if [[ -n $line ]]; then
    {
      echo
      echo "## $(date -u +%Y-%m-%dT%H:%MZ) — $title — $(bench_machine)"
      echo
      echo "Command: \`$command\` (commit $(git -C "$CRM_ROOT" rev-parse --short HEAD); test" \
        "$( ((status == 0)) && echo passed || echo FAILED))."
      echo
      echo "$line"
    } >>"$CRM_ROOT/benchmarks/RESULTS.md"
    rm -f "$log"
  fi
  return "$status"
}
