#!/usr/bin/env bash
# qwen3-bpf without a daemon: offline tokenize/detokenize (--model), --jsonl,
# usage errors, and the messages/exit codes when the daemon is down or the
# socket refuses the caller.
# usage: cli_offline_test.sh QWEN3_BPF_BINARY TOKENIZER_OR_MODEL_DIR
set -euo pipefail
cli=$1
model=$2
tmp=$(mktemp -d)
chmod 755 "$tmp"
closer_pid=
trap '[[ -n $closer_pid ]] && kill $closer_pid 2>/dev/null; rm -rf "$tmp"' EXIT
source "$(dirname "$0")/test_lib.sh"

# ---- offline tokenize / detokenize round trips
texts=("Hello, world!" "你好，世界 こんにちは 안녕하세요" "emoji 👩‍👩‍👧 and tabs	and
newlines" "<|im_start|>user
hi<|im_end|>" "   leading spaces, 12345 digits, don't DON'T")
declare -a all_ids
for t in "${texts[@]}"; do
  expect_exit 0 "tokenize '$t'" -- "$cli" tokenize --model "$model" -- "$t"
  ids=$out
  all_ids+=("$ids")
  [[ $ids =~ ^[0-9]+( [0-9]+)*$ ]] || fail "tokenize output is not a list of ids: $ids"
  expect_exit 0 "detokenize" -- "$cli" detokenize --model "$model" $ids
  [[ $out == "$t" ]] || fail "round trip changed the text: '$t' -> '$out'"
  # stdin gives the same ids as the argument (printf: no trailing newline).
  got=$(printf '%s' "$t" | "$cli" tokenize --model "$model")
  [[ $got == "$ids" ]] || fail "tokenize of stdin differs from the argument for '$t'"
done
pass "offline tokenize/detokenize round trip (${#texts[@]} texts, incl. CJK, emoji, special tokens)"

# Special tokens are single ids unless --split-special.
expect_exit 0 "special token" -- "$cli" tokenize --model "$model" "<|im_start|>"
[[ $out =~ ^[0-9]+$ ]] || fail "<|im_start|> should be one id, got: $out"
special=$out
expect_exit 0 "split special" -- "$cli" tokenize --model "$model" --split-special "<|im_start|>"
[[ $out != "$special" && $out == *" "* ]] || fail "--split-special should give several ids, got: $out"
expect_exit 0 "json pieces" -- "$cli" tokenize --model "$model" --json --pieces "Hello world"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert len(d["ids"]) == len(d["pieces"]) == 2, d
assert d["pieces"][1] == "\u0120world", d
' "$out" || fail "tokenize --json --pieces gave: $out"
expect_exit 0 "detokenize comma list" -- "$cli" detokenize --model "$model" --json "[${ids// /, }]"
pass "special tokens, --split-special, --json --pieces, id list formats"

# ---- --jsonl: one output line per input line, same ids as single calls, errors in place
{
  for t in "${texts[@]}"; do /usr/bin/python3 -c 'import json,sys; print(json.dumps({"text": sys.argv[1]}))' "$t"; done
  echo 'this is not json'
  echo '{"nottext": 1}'
  echo '{"text": "after the errors"}'
} >"$tmp/in.jsonl"
rc=0
"$cli" tokenize --model "$model" --jsonl <"$tmp/in.jsonl" >"$tmp/out.jsonl" || rc=$?
[[ $rc -eq 1 ]] || fail "--jsonl with bad lines should exit 1, got $rc"
[[ $(wc -l <"$tmp/out.jsonl") -eq $((${#texts[@]} + 3)) ]] || fail "--jsonl wrote $(wc -l <"$tmp/out.jsonl") lines for $((${#texts[@]} + 3)) inputs"
i=0
for t in "${texts[@]}"; do
  i=$((i + 1))
  want=${all_ids[$((i - 1))]}
  got=$(sed -n "${i}p" "$tmp/out.jsonl" | /usr/bin/python3 -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["ids"])))')
  [[ $got == "$want" ]] || fail "--jsonl line $i: ids '$got', single call gave '$want'"
done
sed -n "$((i + 1))p" "$tmp/out.jsonl" | grep -q '"error":"line 6: not JSON' || fail "bad JSON line not reported in place: $(sed -n "$((i + 1))p" "$tmp/out.jsonl")"
sed -n "$((i + 2))p" "$tmp/out.jsonl" | grep -q '"error":"line 7: want an object' || fail "line without text not reported"
sed -n "$((i + 3))p" "$tmp/out.jsonl" | grep -q '^{"ids":\[' || fail "the line after the errors was not tokenized"
pass "--jsonl: line-for-line output, same ids as single calls, errors in place, exit 1"

# ---- offline errors
expect_exit 1 "detokenize out-of-range id" -- "$cli" detokenize --model "$model" 999999999
expect_contains "$err" "999999999" "out-of-range id message"
expect_exit 1 "missing model dir" -- "$cli" tokenize --model "$tmp/nonexistent" hello
expect_contains "$err" "$tmp/nonexistent" "missing model message names the directory"
pass "offline errors name the id / directory (exit 1)"

# ---- usage errors: exit 2
expect_exit 2 "no command" -- "$cli"
expect_exit 2 "unknown command" -- "$cli" frobnicate
expect_exit 2 "unknown option" -- "$cli" generate --frobnicate x
expect_exit 2 "bad integer" -- "$cli" generate --max-tokens many x
expect_exit 2 "out of range" -- "$cli" generate --top-p 2 x
expect_exit 2 "missing value" -- "$cli" generate x --seed
expect_exit 2 "repeated option" -- "$cli" generate --seed 1 --seed 2 x
expect_exit 2 "bad id" -- "$cli" detokenize --model "$model" 12 abc
expect_exit 2 "append without session" -- "$cli" generate --append x
expect_exit 0 "help" -- "$cli" generate --help
expect_contains "$out" "--repetition-penalty" "generate --help lists the options"
pass "usage errors exit 2; --help exits 0"

# ---- the command line people expect (CLI11): options anywhere, short forms, --, help CMD
gone=$tmp/gone.sock   # nobody listens: a command that parsed fine then exits 3
for argv in "--socket $gone status" "--json --socket $gone status" "status --socket $gone --json" \
            "-s $gone status" "generate -n 5 -t 0.5 -s $gone hi" "generate hi -n5 -s $gone" \
            "-s $gone generate -- -n 5" "-s $gone sessions list" "-s $gone session ls"; do
  expect_exit 3 "'$argv' parses and tries the daemon" -- $cli $argv
done
for argv in "generate -n 5 -x hi" "status -x" "tokenize -x" "status --wait=yes" "generate -n" \
            "generate -n 1 -n 2 x" "-q status" "generate --logprobs 50 x" "generate --logprobs 21 x"; do
  expect_exit 2 "'$argv' is a usage error" -- $cli --socket "$gone" $argv
done
expect_exit 2 "unknown option names itself" -- "$cli" generate -x hi
expect_contains "$err" "unknown option -x" "unknown short option message"
expect_exit 2 "logprobs limit" -- "$cli" generate --logprobs 50 hi
expect_contains "$err" "--logprobs must be between 0 and 20" "logprobs limit message"
for c in generate chat tokenize detokenize forward sessions status health verify xdp-gen; do
  expect_exit 0 "help $c" -- "$cli" help "$c"
  help_out=$out
  expect_exit 0 "$c --help" -- "$cli" "$c" --help
  [[ $out == "$help_out" ]] || fail "'help $c' differs from '$c --help'"
  expect_exit 0 "$c -h" -- "$cli" "$c" -h
  [[ $out == "$help_out" ]] || fail "'$c -h' differs from '$c --help'"
  expect_contains "$out" "usage: qwen3-bpf $c" "$c help"
  expect_contains "$out" "-s, --socket PATH" "$c help lists the global options"
done
expect_contains "$("$cli" generate --help)" "-n, --max-tokens N" "generate help shows -n"
expect_exit 0 "help session (alias)" -- "$cli" help session
expect_exit 2 "help of an unknown command" -- "$cli" help frobnicate
expect_exit 0 "--help" -- "$cli" --help
expect_contains "$out" "help CMD" "top-level help"
expect_exit 0 "-h" -- "$cli" -h
expect_exit 0 "--version" -- "$cli" --version
[[ $out =~ ^qwen3-bpf\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--version printed '$out'"
expect_exit 2 "invalid UTF-8 text" -- "$cli" tokenize --model "$model" $'ab\xffcd'
expect_contains "$err" "not valid UTF-8 (byte 2)" "invalid UTF-8 message"
[[ $err != *libprotobuf* ]] || fail "a raw libprotobuf line: $err"
pass "options before/after the command, -n/-t/-s/-h, --, unknown options exit 2, help CMD = CMD --help, --version"

# ---- --json: errors are one JSON object on stderr
expect_exit 3 "--json error (daemon down)" -- "$cli" --json status --socket "$gone"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["code"] == "not_running" and d["exit_code"] == 3 and d["command"] == "status", d
assert sys.argv[2] in d["message"], d
' "$err" "$gone" || fail "--json error object: $err"
[[ -z $out ]] || fail "--json error wrote to stdout: $out"
expect_exit 2 "--json usage error" -- "$cli" generate --json --frobnicate x
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["code"] == "usage" and d["exit_code"] == 2 and "--frobnicate" in d["message"], d
' "$err" || fail "--json usage error object: $err"
pass "--json errors: {code, exit_code, message} on stderr"

# ---- daemon down: exit 3 with the start hint that fits the host
expect_exit 3 "missing socket" -- "$cli" status --socket "$tmp/missing.sock"
expect_contains "$err" "qwen3-bpfd is not running: cannot connect to $tmp/missing.sock" "daemon-down message"
# The hint starts the daemon on the socket asked for (systemctl only serves the default one).
expect_contains "$err" "start it (as root; it stays in the foreground) with: qwen3-bpfd --socket $tmp/missing.sock" "daemon-down hint"
[[ $err != *systemctl* ]] || fail "systemctl hint for a custom socket: $err"
QWEN3_BPF_SOCKET=$tmp/env.sock expect_exit 3 "socket from the environment" -- "$cli" generate hi
expect_contains "$err" "$tmp/env.sock" "QWEN3_BPF_SOCKET is used"
# A socket file nobody listens on (ECONNREFUSED).
/usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$tmp/stale.sock"
expect_exit 3 "stale socket" -- "$cli" tokenize --socket "$tmp/stale.sock" hi
expect_contains "$err" "is not running" "stale socket message"
pass "daemon not running: exit 3, message names the socket and how to start it"

# ---- permission denied: exit 4
run_as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
/usr/bin/python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8); os.chmod(sys.argv[1], 0o600)
' "$tmp/private.sock"
expect_exit 4 "socket mode refuses nobody" -- run_as_nobody "$cli" status --socket "$tmp/private.sock"
expect_contains "$err" "permission denied" "EACCES message"
expect_contains "$err" "root or in group qwen3-bpf" "EACCES hint"
# A server that closes every connection at once, like the daemon's credential check.
/usr/bin/python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.listen(16)
open(sys.argv[2], "w").close()
while True:
    c, _ = s.accept(); c.close()
' "$tmp/closer.sock" "$tmp/closer.ready" &
closer_pid=$!
for _ in $(seq 50); do [[ -e $tmp/closer.ready ]] && break; sleep 0.1; done
expect_exit 4 "connection closed by the credential check (nobody)" -- run_as_nobody "$cli" sessions list --socket "$tmp/closer.sock"
expect_contains "$err" "permission denied: qwen3-bpfd closed the connection (credential check)" "closed-connection message"
expect_exit 3 "connection closed for root" -- "$cli" sessions list --socket "$tmp/closer.sock"
expect_contains "$err" "closed the connection" "closed-connection message for root"
pass "permission denied: exit 4 (socket mode, credential check); root with a closing daemon: exit 3"
echo "all CLI offline tests passed"
