# Sourced by test scripts that run a private qwen3-bpfd. Makes $tmp, a scratch
# directory (world-readable so unprivileged peers can reach the socket) with
# the socket path $sock in it; on exit stops the daemon whose pid the script put
# in $daemon_pid (TERM, then KILL after 10 s) and removes $tmp.
tmp=$(mktemp -d)
chmod 755 "$tmp"
sock=$tmp/qwen3-bpfd.sock
daemon_pid=
stop_daemon_and_clean() {
  if [[ -n $daemon_pid ]] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid"
    for _ in $(seq 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$daemon_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap stop_daemon_and_clean EXIT
