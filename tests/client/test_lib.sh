# Helpers shared by the CLI test scripts (sourced).
# With a test daemon running (start_test_daemon), its log's tail comes too.
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  [[ -n ${tmp:-} && -f $tmp/daemon.log ]] && { echo "---- daemon log (tail)"; tail -n 30 "$tmp/daemon.log"; } >&2
  exit 1
}
pass() { printf 'ok   %s\n' "$*"; }

# expect_exit CODE DESCRIPTION -- COMMAND...: runs COMMAND, captures stdout in
# $out and stderr in $err, and fails unless it exits with CODE.
expect_exit() {
  local want=$1 what=$2
  shift 3
  local rc=0
  out=$("$@" 2>"$tmp/stderr") || rc=$?
  err=$(cat "$tmp/stderr")
  [[ $rc -eq $want ]] || fail "$what: exit $rc, want $want; stdout: $out; stderr: $err"
}

# expect_contains HAYSTACK NEEDLE DESCRIPTION
expect_contains() {
  [[ $1 == *"$2"* ]] || fail "$3: '$2' not in: $1"
}

# start_test_daemon QWEN3_BPFD MODEL_DIR: a private qwen3-bpfd on $sock (from
# tests/lib/daemon_scratch.sh, which also stops it) with an empty configuration;
# sets daemon_pid and QWEN3_BPF_SOCKET and returns once the socket exists.
start_test_daemon() {
  : >"$tmp/empty.conf"
  "$1" --foreground --config "$tmp/empty.conf" --model "$2" --socket "$sock" \
    --state-dir "$tmp/state" --threads 2 --backend "${QWEN3_CLI_TEST_BACKEND:-bpf}" >"$tmp/daemon.log" 2>&1 &
  daemon_pid=$!
  export QWEN3_BPF_SOCKET=$sock
  for _ in $(seq 300); do
    [[ -S $sock ]] && return 0
    kill -0 "$daemon_pid" 2>/dev/null || fail "the daemon exited"
    sleep 0.1
  done
  fail "the daemon made no socket in 30 s"
}
