#!/usr/bin/env bash
# Ctrl-C is always clean: SIGINT at random points of a `generate` stream
# (before the connection, during prefill, during decode), 100 times, against a
# real qwen3-bpfd with the tiny test model. Every run must exit 130 without an
# abort or a gRPC/absl RAW message, and under --json its last line must count
# exactly the tokens it printed. A second Ctrl-C must end the client at once.
# usage: cli_interrupt_test.sh QWEN3_BPF QWEN3_BPFD MODEL_DIR [RUNS]
set -euo pipefail
cli=$1
daemon=$2
model=$(realpath "$3")
runs=${4:-100}
[[ -f $model/config.json ]] || { echo "FAIL: no model at $model" >&2; exit 1; }
source "$(dirname "$0")/../lib/daemon_scratch.sh"
source "$(dirname "$0")/test_lib.sh"
# Job control: background jobs of a non-interactive shell otherwise start with
# SIGINT ignored, and a signal before the client's own setup would be lost.
set -m

start_test_daemon "$daemon" "$model"
"$cli" status --wait --timeout 300 >/dev/null || fail "the daemon did not get ready"

# Waits up to $2 tenths of a second for pid $1 to end; its status in $rc.
wait_for() {
  local pid=$1 tenths=$2
  for _ in $(seq "$tenths"); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && return 1
  rc=0
  wait "$pid" || rc=$?
}

checked=0      # --json runs whose last line was checked
with_tokens=0  # ... of which at least one token had arrived (so the daemon saw the request)
for i in $(seq "$runs"); do
  json=()
  (( i % 2 )) && json=(--json)
  rm -f "$tmp/out"
  "$cli" generate "${json[@]}" --max-tokens 100000 --ignore-eos "Count to a million:" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  # 0 to 1.5 s: before the connection, inside prefill, or well into decode.
  sleep "$(printf '0.%03d' $((RANDOM % 1000)))"
  (( RANDOM % 3 == 0 )) && sleep 0.5
  kill -INT "$pid"
  wait_for "$pid" 100 || { kill -KILL "$pid"; fail "run $i: generate still runs 10 s after Ctrl-C"; }
  grep -qE 'RAW:|Mutex|terminate called|Aborted|libprotobuf' "$tmp/err" && fail "run $i: $(cat "$tmp/err")"
  [[ $rc -eq 130 ]] || fail "run $i: exit $rc after Ctrl-C, want 130; stderr: $(cat "$tmp/err")"
  if [[ -s $tmp/out && ${#json[@]} -gt 0 ]]; then
    /usr/bin/python3 - "$tmp/out" <<'PY' || fail "run $i: --json stream after Ctrl-C: $(tail -n 3 "$tmp/out")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
tokens, last = lines[:-1], lines[-1]
assert last["finish_reason"] == "cancelled", last
assert all(m["finish_reason"] is None for m in tokens), tokens[:1]
assert last["usage"]["completion_tokens"] == len(tokens), (last, len(tokens))
PY
    grep -qE "finish: cancelled \(Ctrl-C\); completion [0-9]+ tokens received" "$tmp/err" ||
      fail "run $i: no finish line with the received count: $(cat "$tmp/err")"
    checked=$((checked + 1))
    if (( $(wc -l <"$tmp/out") > 1 )); then with_tokens=$((with_tokens + 1)); fi
  fi
done
(( with_tokens >= runs / 8 )) || fail "only $with_tokens of $((runs / 2)) --json runs were cancelled mid-stream"
pass "$runs runs with SIGINT at random points: all exit 130, no abort; $checked --json runs count their tokens ($with_tokens mid-stream)"

# Two presses back to back end the client at once too. (A second press while a
# slow cancel is still pending is cli_unit_test's Interrupt death test.)
for i in 1 2 3 4 5; do
  rm -f "$tmp/out"
  "$cli" generate --max-tokens 100000 --ignore-eos "Count" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  for _ in $(seq 300); do [[ -s $tmp/out ]] && break; sleep 0.1; done
  kill -INT "$pid"; kill -INT "$pid" 2>/dev/null || true
  wait_for "$pid" 20 || { kill -KILL "$pid"; fail "double Ctrl-C: still running after 2 s"; }
  [[ $rc -eq 130 ]] || fail "double Ctrl-C: exit $rc; stderr: $(cat "$tmp/err")"
  grep -qE 'RAW:|Mutex|terminate called|Aborted' "$tmp/err" && fail "double Ctrl-C: $(cat "$tmp/err")"
done
pass "two Ctrl-C back to back: exit 130 at once"

# The daemon is left with no stream running (cancelled ones end within a step).
for _ in $(seq 100); do
  out=$("$cli" status --json)
  /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(d["active_streams"] != 0)' "$out" && break
  sleep 0.2
done
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["active_streams"] == 0, d
assert d["requests"]["cancelled"] >= int(sys.argv[2]), d["requests"]
' "$out" "$with_tokens" || fail "daemon after the interrupts: $out"
pass "the daemon counted the cancels and runs no stream"
echo "all CLI interrupt tests passed"
