# shellcheck shell=bash
# Helpers shared by scripts/run, scripts/test and scripts/psql. Source it, do not run it:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Everything here works without systemd: PostgreSQL and Redis are started as plain processes
# with their data in a directory the caller chooses, listening on 127.0.0.1 only.

# Repository root (the folder that holds CMakePresets.json).
CRM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CRM_ROOT

CRM_PG_BINDIR=/usr/lib/postgresql/15/bin
CRM_PG_SYSTEM_USER=carecrm-pg

# Everything the project needs to build, test and run, as Debian bookworm packages.
CRM_PACKAGES=(
  build-essential cmake pkg-config ccache git
  libcaf-dev libboost1.81-dev libboost-json1.81-dev libhiredis-dev libpqxx-dev libsodium-dev
  libssl-dev libcurl4-openssl-dev libtomlplusplus-dev libgtest-dev libgmock-dev libbenchmark-dev
  libhowardhinnant-date-dev libstemmer-dev libhunspell-dev hunspell-en-us hunspell-pt-br hunspell-es
  libxml2-dev libpoppler-cpp-dev python3-reportlab
  tzdata
  postgresql-15 postgresql-client-15 redis-server
  python3 python3-pytest python3-jsonschema python3-icalendar python3-aiosmtpd wrk procps iproute2 curl iso-codes openssl
  clang-14 libclang-rt-14-dev
  help2man lintian systemd prometheus chromium chromium-driver python3-selenium jq haproxy
  patroni etcd-server
)

crm_log() { printf '[carecrm] %s\n' "$*" >&2; }
crm_die() {
  printf '[carecrm] error: %s\n' "$*" >&2
  return 1
}

crm_is_root() { [[ $(id -u) -eq 0 ]]; }

# Prefix for commands that need root: runs the command directly as root, through sudo otherwise.
#   crm_sudo apt-get install ...
crm_sudo() {
  if crm_is_root; then
    "$@"
  else
    if ! command -v sudo >/dev/null 2>&1; then
      crm_die "need root for: $* (and sudo is not installed)"
      return 1
    fi
    sudo "$@"
  fi
}

# Absolute path, whether or not it exists yet.
_crm_abspath() { realpath -m -- "$1"; }

# ---- packages ----------------------------------------------------------------------------

# Test tools from the npm registry, pinned by their package-lock.json: HL7's FHIR R4 JSON schema
# (tests/fhir) and Redocly's OpenAPI linter (tests/openapi). `npm ci` runs only when the installed
# tree is not the locked one.
ensure_test_tools() {
  command -v npm >/dev/null || crm_die "npm is required for the test tools (Node.js 20 and npm)"
  local dir
  for dir in "$CRM_ROOT/tests/fhir" "$CRM_ROOT/tests/openapi"; do
    if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.carecrm-lock" 2>/dev/null; then
      crm_log "npm ci (${dir#"$CRM_ROOT"/})"
      (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts >/dev/null) ||
        crm_die "npm ci failed in $dir"
      cp "$dir/package-lock.json" "$dir/node_modules/.carecrm-lock"
    fi
  done
}

# Installs whatever of CRM_PACKAGES is missing. One dpkg-query call when all are present.
ensure_packages() {
  local -A installed=()
  local name status
  while read -r name status; do
    if [[ $status == ii ]]; then installed[$name]=1; fi
  done < <(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${CRM_PACKAGES[@]}" 2>/dev/null || true)

  local missing=() p
  for p in "${CRM_PACKAGES[@]}"; do
    if [[ -z ${installed[$p]:-} ]]; then missing+=("$p"); fi
  done
  if ((${#missing[@]} == 0)); then return 0; fi

  crm_log "installing missing packages: ${missing[*]}"
  # Keep the packages' maintainer scripts from starting system-wide postgres/redis services:
  # this project runs its own instances (and there is no systemd).
  local made_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    crm_sudo sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
    made_policy=1
  fi
  local rc=0
  crm_sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q || rc=$?
  if ((rc == 0)); then
    crm_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
      "${missing[@]}" || rc=$?
  fi
  if ((made_policy)); then crm_sudo rm -f /usr/sbin/policy-rc.d; fi
  ((rc == 0)) || crm_die "apt-get failed (exit $rc)"
}

# ---- build -------------------------------------------------------------------------------

# crm_build PRESET [TARGET...]: configure with the preset, then build (all targets, or the given).
crm_build() {
  local preset=${1:?crm_build PRESET [TARGET...]}
  shift
  export CCACHE_DIR="${CCACHE_DIR:-$CRM_ROOT/.local/ccache}"
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-2G}"
  mkdir -p "$CCACHE_DIR"
  local args=(--build --preset "$preset" -j "${CRM_JOBS:-$(nproc)}")
  if (($# > 0)); then args+=(--target "$@"); fi
  (
    cd "$CRM_ROOT" || exit 1
    cmake --preset "$preset" || exit 1
    cmake "${args[@]}"
  )
}

# ---- test certificates -----------------------------------------------------------------------

# cluster_pki DIR: a CA (DIR/ca.pem) and one certificate signed by it (DIR/node.pem,
# DIR/node.key), kept when they exist: the TLS certificate the test cluster's HAProxy serves
# (deploy/haproxy/carecrm.cfg), trusted by the tests' clients through the CA.
cluster_pki() {
  local dir=${1:?cluster_pki DIR}
  [[ -s $dir/node.pem && -s $dir/node.key && -s $dir/ca.pem ]] && return 0
  mkdir -p "$dir"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  openssl req -x509 "${ec[@]}" -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 3650 \
    -subj /CN=carecrm-cluster-ca >/dev/null 2>&1 || crm_die "cannot make the cluster CA"
  openssl req "${ec[@]}" -keyout "$dir/node.key" -out "$dir/node.csr" \
    -subj /CN=carecrm-node >/dev/null 2>&1 || crm_die "cannot make the node key"
  openssl x509 -req -in "$dir/node.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -out "$dir/node.pem" -days 3650 >/dev/null 2>&1 ||
    crm_die "cannot sign the node certificate"
}

# ---- ports -------------------------------------------------------------------------------

# Prints a TCP port that is free on 127.0.0.1 right now.
free_port() {
  python3 -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# ---- PostgreSQL --------------------------------------------------------------------------

# The OS user the PostgreSQL server runs as: carecrm-pg when we are root (PostgreSQL refuses to
# run as root), the current user otherwise. Creates carecrm-pg if needed.
crm_pg_user() {
  if crm_is_root; then
    if ! id -u "$CRM_PG_SYSTEM_USER" >/dev/null 2>&1; then
      useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
        "$CRM_PG_SYSTEM_USER"
    fi
    printf '%s\n' "$CRM_PG_SYSTEM_USER"
  else
    id -un
  fi
}

# Runs a command as the PostgreSQL OS user, from / (the caller's cwd may be unreadable to it).
_crm_as_pg() {
  if crm_is_root; then
    (cd / && runuser -u "$CRM_PG_SYSTEM_USER" -- "$@")
  else
    (cd / && "$@")
  fi
}

# Makes sure USER can reach DIR: adds o+x (search only, no listing) to each ancestor that
# blocks it, e.g. mktemp's 0700 directories.
_crm_make_traversable() {
  local dir=$1 user=$2
  runuser -u "$user" -- test -x "$dir" 2>/dev/null && return 0
  local d=$dir
  local chain=()
  while [[ -n $d && $d != / ]]; do
    chain=("$d" "${chain[@]}")
    d=${d%/*}
  done
  for d in "${chain[@]}"; do
    if ! runuser -u "$user" -- test -x "$d" 2>/dev/null; then
      crm_log "chmod o+x $d (so that $user can reach the PostgreSQL data directory)"
      chmod o+x "$d"
    fi
  done
}

# Quotes a value for postgresql.conf.
_crm_pg_conf_quote() { printf "'%s'" "${1//\'/\'\'}"; }

# pg_start DATA_DIR PORT: creates the cluster if DATA_DIR has none, then starts it on
# 127.0.0.1:PORT (log: DATA_DIR/../postgres.log) and waits until it accepts connections.
# Reuses a server already running on DATA_DIR and PORT.
pg_start() {
  local data port
  data=$(_crm_abspath "${1:?pg_start DATA_DIR PORT}")
  port=${2:?pg_start DATA_DIR PORT}
  local parent=${data%/*}
  local log=$parent/postgres.log
  local pguser
  pguser=$(crm_pg_user)

  mkdir -p "$data"
  if crm_is_root; then
    _crm_make_traversable "$parent" "$pguser"
    # A data directory made on another machine (or before the user existed) may carry another uid.
    if [[ $(stat -c %U "$data") != "$pguser" ]]; then chown -R "$pguser": "$data"; fi
  fi
  chmod 700 "$data"

  if [[ ! -f $data/PG_VERSION ]]; then
    if [[ -n $(ls -A "$data") ]]; then
      crm_die "$data is not empty and holds no PostgreSQL cluster (no PG_VERSION)"
      return 1
    fi
    crm_log "initdb $data"
    if ! _crm_as_pg "$CRM_PG_BINDIR/initdb" -D "$data" --username=postgres \
      --auth-local=trust --auth-host=trust --encoding=UTF8 --locale=C >"$parent/initdb.log" 2>&1; then
      cat "$parent/initdb.log" >&2
      crm_die "initdb failed"
      return 1
    fi
    printf "\n# carecrm: settings written by scripts/lib.sh on every start\ninclude_if_exists = 'carecrm.conf'\n" \
      >>"$data/postgresql.conf"
  fi

  # Unix sockets have a ~107-byte path limit: fall back to a short directory for deep paths.
  local sockdir=$data
  if ((${#data} > 80)); then
    sockdir=/tmp/.carecrm-pg-$port
    mkdir -p "$sockdir"
    if crm_is_root; then chown "$pguser": "$sockdir"; fi
    chmod 700 "$sockdir"
  fi

  {
    printf '# Written by scripts/lib.sh pg_start; rewritten on every start.\n'
    printf 'listen_addresses = %s\n' "'127.0.0.1'"
    printf 'port = %d\n' "$port"
    printf 'unix_socket_directories = %s\n' "$(_crm_pg_conf_quote "$sockdir")"
    printf 'fsync = on\nsynchronous_commit = on\nfull_page_writes = on\n'
    printf 'max_connections = 200\nshared_buffers = 256MB\n'
    printf 'logging_collector = off\n'
  } >"$data/carecrm.conf"
  touch "$log"
  if crm_is_root; then chown "$pguser": "$data/carecrm.conf" "$log"; fi
  chmod 600 "$data/carecrm.conf"

  if _crm_as_pg "$CRM_PG_BINDIR/pg_ctl" status -D "$data" >/dev/null 2>&1; then
    if "$CRM_PG_BINDIR/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; then
      crm_log "PostgreSQL already running on 127.0.0.1:$port ($data)"
      return 0
    fi
    crm_log "PostgreSQL on $data runs with other settings: restarting it"
    _crm_as_pg "$CRM_PG_BINDIR/pg_ctl" stop -D "$data" -m fast -w -s || true
  fi

  crm_log "starting PostgreSQL on 127.0.0.1:$port (data $data, log $log)"
  if ! _crm_as_pg "$CRM_PG_BINDIR/pg_ctl" start -D "$data" -l "$log" -w -t 120 -s; then
    tail -n 30 "$log" >&2 || true
    crm_die "PostgreSQL did not start (is port $port taken?)"
    return 1
  fi
  local i
  for ((i = 0; i < 600; i++)); do
    "$CRM_PG_BINDIR/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres && return 0
    sleep 0.1
  done
  tail -n 30 "$log" >&2 || true
  crm_die "PostgreSQL on port $port is not ready after 60 s"
}

# pg_stop DATA_DIR: fast shutdown; nothing to do when it is not running.
pg_stop() {
  local data
  data=$(_crm_abspath "${1:?pg_stop DATA_DIR}")
  [[ -f $data/PG_VERSION ]] || return 0
  if crm_is_root && ! id -u "$CRM_PG_SYSTEM_USER" >/dev/null 2>&1; then return 0; fi
  if _crm_as_pg "$CRM_PG_BINDIR/pg_ctl" status -D "$data" >/dev/null 2>&1; then
    crm_log "stopping PostgreSQL ($data)"
    _crm_as_pg "$CRM_PG_BINDIR/pg_ctl" stop -D "$data" -m fast -w -t 60 -s || true
  fi
  return 0
}

# pg_ensure_db PORT DBNAME: creates the database if it does not exist.
pg_ensure_db() {
  local port=${1:?pg_ensure_db PORT DBNAME} db=${2:?pg_ensure_db PORT DBNAME}
  psql -X -q -v ON_ERROR_STOP=1 -v db="$db" -h 127.0.0.1 -p "$port" -U postgres -d postgres <<'SQL'
SELECT format('CREATE DATABASE %I', :'db')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SQL
}

# ---- Redis -------------------------------------------------------------------------------

_crm_redis_quote() {
  local s=${1//\\/\\\\}
  printf '"%s"' "${s//\"/\\\"}"
}

_crm_redis_ping() { [[ $(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null) == PONG ]]; }

# redis_start DIR PORT: a daemonized redis-server on 127.0.0.1:PORT, data and AOF in DIR,
# every write fsynced (appendfsync always), no RDB snapshots. Waits for PONG.
redis_start() {
  local dir port
  dir=$(_crm_abspath "${1:?redis_start DIR PORT}")
  port=${2:?redis_start DIR PORT}
  mkdir -p "$dir"

  if _crm_redis_ping "$port"; then
    local running_dir
    running_dir=$(redis-cli -h 127.0.0.1 -p "$port" config get dir 2>/dev/null | sed -n 2p)
    if [[ $running_dir == "$dir" ]]; then
      crm_log "Redis already running on 127.0.0.1:$port ($dir)"
      return 0
    fi
    crm_die "port $port already has a Redis serving ${running_dir:-another directory}"
    return 1
  fi

  {
    printf '# Written by scripts/lib.sh redis_start; rewritten on every start.\n'
    printf 'bind 127.0.0.1\nport %d\nprotected-mode no\n' "$port"
    printf 'dir %s\n' "$(_crm_redis_quote "$dir")"
    printf 'daemonize yes\n'
    printf 'pidfile %s\n' "$(_crm_redis_quote "$dir/redis.pid")"
    printf 'logfile %s\n' "$(_crm_redis_quote "$dir/redis.log")"
    printf 'appendonly yes\nappendfsync always\nsave ""\n'
  } >"$dir/redis.conf"

  crm_log "starting Redis on 127.0.0.1:$port (dir $dir)"
  if ! redis-server "$dir/redis.conf"; then
    tail -n 30 "$dir/redis.log" >&2 2>/dev/null || true
    crm_die "redis-server failed to start"
    return 1
  fi
  local i
  for ((i = 0; i < 300; i++)); do
    _crm_redis_ping "$port" && return 0
    sleep 0.1
  done
  tail -n 30 "$dir/redis.log" >&2 2>/dev/null || true
  crm_die "Redis on port $port did not answer PING within 30 s"
}

# redis_stop DIR PORT: SHUTDOWN NOSAVE (the AOF is already fsynced), else kill the pidfile's pid.
redis_stop() {
  local dir port
  dir=$(_crm_abspath "${1:?redis_stop DIR PORT}")
  port=${2:?redis_stop DIR PORT}
  local pidfile=$dir/redis.pid pid=""
  [[ -f $pidfile ]] && pid=$(<"$pidfile")
  # Only a pid that is still a redis-server counts (pids get reused).
  if [[ -n $pid ]] && ! grep -q '^redis' "/proc/$pid/comm" 2>/dev/null; then pid=""; fi

  if _crm_redis_ping "$port"; then
    crm_log "stopping Redis (127.0.0.1:$port)"
    redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
  fi
  if [[ -n $pid ]]; then
    local i
    for ((i = 0; i < 100; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      if ((i == 20)); then kill -TERM "$pid" 2>/dev/null || true; fi
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$pidfile"
  return 0
}
