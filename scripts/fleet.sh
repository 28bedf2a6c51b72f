#!/usr/bin/env bash
# A fleet of qwen3-bpfd daemons behind HAProxy on this host, for trying the
# gateway setup of docs/deploy.md. Everything stays on loopback (127.0.0.0/8).
#
#   scripts/fleet.sh up N      start N daemons (127.0.0.2 .. 127.0.0.N+1) and the gateway (127.0.0.1)
#   scripts/fleet.sh status    which daemons and gateway run
#   scripts/fleet.sh maint I   take daemon dI out of the gateway (before draining it)
#   scripts/fleet.sh ready I   put it back
#   scripts/fleet.sh down      stop them all (state kept; `down --clean` removes the directory)
#
# `up` prints lines a shell can source:
#   QWEN3_FLEET_URL=http://127.0.0.1:8480   QWEN3_FLEET_TOKEN=...   QWEN3_FLEET_DIR=...
# Each daemon dI has its own directory $QWEN3_FLEET_DIR/dI: configuration, state,
# gRPC socket (grpc.sock), HTTP socket (http.sock) and log (daemon.log).
#
# Environment: QWEN3_FLEET_DIR (default /tmp/qwen3-fleet), QWEN3_FLEET_PORT (the
# gateway's, default 8480), QWEN3_FLEET_BACKEND_PORT (every daemon's, on its own
# address, default 8481), QWEN3_BPFD (the daemon; default: the build tree's,
# else the installed one), QWEN3_MODEL (a model directory; default: the shipped
# model/qwen3-kerneldoc.tar.xz, unpacked once into the fleet directory),
# QWEN3_FLEET_THREADS (worker threads per daemon, default 1).
set -euo pipefail

root_dir=$(cd "$(dirname "$0")/.." && pwd)
dir=${QWEN3_FLEET_DIR:-/tmp/qwen3-fleet}
port=${QWEN3_FLEET_PORT:-8480}
backend_port=${QWEN3_FLEET_BACKEND_PORT:-8481}
template=$root_dir/deploy/haproxy/haproxy.cfg

die() { echo "fleet: $*" >&2; exit 1; }

daemon_bin() {
  if [[ -n ${QWEN3_BPFD:-} ]]; then echo "$QWEN3_BPFD"; return; fi
  for b in "$root_dir/build/daemon/app/qwen3-bpfd" "$(command -v qwen3-bpfd || true)"; do
    [[ -n $b && -x $b ]] && { echo "$b"; return; }
  done
  die "no qwen3-bpfd: build it (scripts/build.sh qwen3-bpfd), install it, or set QWEN3_BPFD"
}

model_dir() {
  if [[ -n ${QWEN3_MODEL:-} ]]; then echo "$QWEN3_MODEL"; return; fi
  local m=$dir/model
  if [[ ! -f $m/config.json ]]; then
    rm -rf "$m.new" && mkdir -p "$m.new"
    # The shipped model: model/ in a checkout, models/ where the package installs this script.
    local tarball=$root_dir/model/qwen3-kerneldoc.tar.xz
    [[ -f $tarball ]] || tarball=$root_dir/models/qwen3-kerneldoc.tar.xz
    tar -xJf "$tarball" -C "$m.new" --strip-components=1 --no-same-owner
    rm -rf "$m" && mv "$m.new" "$m"
  fi
  echo "$m"
}

# The servers of one backend section of the template, for daemons 1..n.
server_lines() {  # section n
  local section=$1 n=$2 i names=""
  for ((i = 1; i <= n; i++)); do names+=" d$i"; done
  if [[ $section == qwen3_direct ]]; then
    echo "    http-request return status 404 content-type application/json string \"{\\\"error\\\":{\\\"message\\\":\\\"no such backend server\\\",\\\"type\\\":\\\"invalid_request_error\\\",\\\"param\\\":null,\\\"code\\\":\\\"not_found\\\"}}\" unless { var(txn.server) -m str$names }"
    for ((i = 1; i <= n; i++)); do echo "    use-server d$i if { var(txn.server) -m str d$i }"; done
    for ((i = 1; i <= n; i++)); do echo "    server d$i 127.0.0.$((i + 1)):$backend_port track qwen3_any/d$i"; done
  else
    for ((i = 1; i <= n; i++)); do echo "    server d$i 127.0.0.$((i + 1)):$backend_port check"; done
  fi
}

# deploy/haproxy/haproxy.cfg with the servers of n daemons between its markers.
write_haproxy_cfg() {  # n out
  local n=$1 out=$2 section="" skip=0 line
  : >"$out"
  while IFS= read -r line; do
    [[ $line =~ ^backend\ ([a-z0-9_]+) ]] && section=${BASH_REMATCH[1]}
    if [[ $line == *"# servers:begin"* ]]; then
      echo "$line" >>"$out"; server_lines "$section" "$n" >>"$out"; skip=1; continue
    fi
    [[ $line == *"# servers:end"* ]] && skip=0
    ((skip)) || echo "$line" >>"$out"
  done <"$template"
}

healthy() {  # url token
  [[ $(curl -s -o /dev/null -w '%{http_code}' -m 2 -H "Authorization: Bearer $2" "$1/health" || true) == 200 ]]
}

admin() {  # command...: HAProxy's admin socket (python3: no socat needed)
  python3 - "$dir/haproxy.sock" "$*" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall((sys.argv[2] + "\n").encode())
out = b""
while chunk := s.recv(65536): out += chunk
sys.stdout.write(out.decode())
PY
}

start_daemon() {  # i bin model
  local i=$1 bin=$2 model=$3 d=$dir/d$1
  mkdir -p "$d/state"
  cat >"$d/qwen3-bpfd.conf" <<CONF
model_dir = $model
socket_path = $d/grpc.sock
http_socket = $d/http.sock
http_listen = 127.0.0.$((i + 1)):$backend_port
http_token_file = $dir/backend-token
state_dir = $d/state
threads = ${QWEN3_FLEET_THREADS:-1}
socket_group = root
# Every client of the gateway is one TCP client (uid 4294967294) to a daemon: its quota is the daemon's.
max_sessions = 256
max_sessions_per_uid = 256
kv_budget_mib_per_uid = ${QWEN3_FLEET_KV_MIB:-1024}
kv_budget_mib = ${QWEN3_FLEET_KV_MIB:-1024}
# Sessions drained through the gateway arrive as one request body each (POST /v1/sessions/import).
http_max_body_bytes = 268435456
CONF
  (env -u LISTEN_FDS -u LISTEN_PID -u NOTIFY_SOCKET setsid "$bin" --config "$d/qwen3-bpfd.conf" >"$d/daemon.log" 2>&1 &
   echo $! >"$d/pid")
}

up() {
  local n=${1:-}
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 250)) || die "usage: fleet.sh up N (1..250 daemons)"
  command -v haproxy >/dev/null || die "haproxy is missing: apt install haproxy (scripts/setup-deps.sh installs it)"
  [[ -f $dir/haproxy.pid ]] && kill -0 "$(cat "$dir/haproxy.pid")" 2>/dev/null && die "a fleet runs in $dir: fleet.sh down first"
  mkdir -p "$dir" && chmod 700 "$dir"
  local bin model i
  bin=$(daemon_bin)
  model=$(model_dir)
  for f in fleet-token backend-token; do
    [[ -s $dir/$f ]] || (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/$f")
  done
  echo "$n" >"$dir/size"
  for ((i = 1; i <= n; i++)); do start_daemon "$i" "$bin" "$model"; done
  write_haproxy_cfg "$n" "$dir/haproxy.cfg"
  local backend_token fleet_token
  backend_token=$(cat "$dir/backend-token")
  fleet_token=$(cat "$dir/fleet-token")
  for ((i = 1; i <= n; i++)); do
    local deadline=$((SECONDS + 300))
    until healthy "http://127.0.0.$((i + 1)):$backend_port" "$backend_token"; do
      kill -0 "$(cat "$dir/d$i/pid")" 2>/dev/null || die "daemon d$i exited: $(tail -5 "$dir/d$i/daemon.log")"
      ((SECONDS < deadline)) || die "daemon d$i not healthy after 300 s (log: $dir/d$i/daemon.log)"
      sleep 0.2
    done
  done
  QWEN3_FLEET_BIND=127.0.0.1:$port QWEN3_FLEET_TOKEN=$fleet_token QWEN3_BACKEND_TOKEN=$backend_token \
    QWEN3_FLEET_ADMIN_SOCKET=$dir/haproxy.sock haproxy -D -p "$dir/haproxy.pid" -f "$dir/haproxy.cfg"
  local deadline=$((SECONDS + 30))
  until healthy "http://127.0.0.1:$port" "$fleet_token"; do
    ((SECONDS < deadline)) || die "the gateway does not answer on 127.0.0.1:$port"
    sleep 0.2
  done
  echo "QWEN3_FLEET_URL=http://127.0.0.1:$port"
  echo "QWEN3_FLEET_TOKEN=$fleet_token"
  echo "QWEN3_FLEET_DIR=$dir"
}

stop_pid() {  # pidfile
  local pid
  [[ -f $1 ]] || return 0
  pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

down() {
  [[ -d $dir ]] || return 0
  stop_pid "$dir/haproxy.pid"
  for p in "$dir"/d*/pid; do [[ -e $p ]] && stop_pid "$p"; done
  [[ ${1:-} == --clean ]] && rm -rf "$dir"
  return 0
}

status() {
  [[ -f $dir/size ]] || { echo "no fleet in $dir"; return 1; }
  local n i
  n=$(cat "$dir/size")
  for ((i = 1; i <= n; i++)); do
    if [[ -f $dir/d$i/pid ]] && kill -0 "$(cat "$dir/d$i/pid")" 2>/dev/null; then
      echo "d$i  127.0.0.$((i + 1)):$backend_port  pid $(cat "$dir/d$i/pid")  socket $dir/d$i/grpc.sock"
    else
      echo "d$i  127.0.0.$((i + 1)):$backend_port  not running"
    fi
  done
  [[ -f $dir/haproxy.pid ]] && kill -0 "$(cat "$dir/haproxy.pid")" 2>/dev/null &&
    echo "gateway  http://127.0.0.1:$port  pid $(cat "$dir/haproxy.pid")" || echo "gateway  not running"
}

server_state() {  # i state
  [[ ${1:-} =~ ^[0-9]+$ ]] || die "usage: fleet.sh maint|ready I"
  for b in qwen3_sessions qwen3_any; do admin "set server $b/d$1 state $2"; done
}

case ${1:-} in
  up) up "${2:-}" ;;
  down) down "${2:-}" ;;
  status) status ;;
  maint) server_state "${2:-}" maint ;;
  ready) server_state "${2:-}" ready ;;
  *) die "usage: fleet.sh up N | down [--clean] | status | maint I | ready I" ;;
esac
