#!/usr/bin/env bash
# qwen3-bpf against a real qwen3-bpfd on a temporary socket (tiny test model):
# status/health, tokenize, streaming generate and its JSON, sessions with
# cached tokens, forward, piped chat, chat on a pty (script, tmux), the prefill
# spinner, Ctrl-C cancellation, error exit codes (JSON too), access refused for
# an unprivileged user, verify and xdp-gen output.
# usage: cli_daemon_test.sh QWEN3_BPF QWEN3_BPFD MODEL_DIR
set -euo pipefail
cli=$1
daemon=$2
model=$(realpath "$3")
[[ -f $model/config.json ]] || { echo "FAIL: no model at $model" >&2; exit 1; }
source "$(dirname "$0")/../lib/daemon_scratch.sh"
source "$(dirname "$0")/test_lib.sh"
pyjson() { /usr/bin/python3 -c "import json,sys; d=json.loads(sys.argv[1]); $1" "${@:2}"; }

start_test_daemon "$daemon" "$model"

# ---- status / health
expect_exit 0 "status --wait" -- "$cli" status --wait --timeout 300
expect_contains "$out" ": ready" "status after --wait"
expect_contains "$out" "$model" "status names the model"
expect_exit 0 "status --json" -- "$cli" status --json
pyjson 'assert d["load_state"] == "ready" and d["socket_path"] and isinstance(d["requests"]["generate"], int), d' "$out" ||
  fail "status --json (enum words, 64-bit numbers as numbers): $out"
expect_exit 0 "health" -- "$cli" health
[[ $out == SERVING ]] || fail "health printed '$out'"
pass "status --wait / --json, health SERVING"

# ---- tokenize through the daemon = offline with the model's tokenizer files
text="Hello, world! 你好 <|im_start|>"
expect_exit 0 "tokenize via daemon" -- "$cli" tokenize -- "$text"
daemon_ids=$out
expect_exit 0 "tokenize offline" -- "$cli" tokenize --model "$model" -- "$text"
[[ $daemon_ids == "$out" ]] || fail "daemon tokenize '$daemon_ids' != offline '$out'"
expect_exit 0 "detokenize via daemon" -- "$cli" detokenize $daemon_ids
[[ $out == "$text" ]] || fail "detokenize via daemon gave '$out'"
printf '{"text": "a"}\n{"text": "b c"}\n' | "$cli" tokenize --jsonl >"$tmp/jsonl" || fail "tokenize --jsonl via daemon"
[[ $(wc -l <"$tmp/jsonl") -eq 2 ]] || fail "tokenize --jsonl via daemon: $(cat "$tmp/jsonl")"
pass "tokenize/detokenize/--jsonl through the daemon match the offline tokenizer"

# ---- generate: streaming text equals the JSON stream's deltas (greedy, asked for, is deterministic)
expect_exit 0 "generate --json" -- "$cli" generate --json --temperature 0 --max-tokens 6 --ignore-eos "The kernel"
json_stream=$out
/usr/bin/python3 - "$json_stream" <<'PY' || fail "generate --json stream: $json_stream"
import json, sys
msgs = [json.loads(l) for l in sys.argv[1].splitlines()]
tokens, final = msgs[:-1], msgs[-1]
assert len(tokens) == 6, len(tokens)
assert [m["index"] for m in tokens] == list(range(6)), [m["index"] for m in tokens]
assert all(m["finish_reason"] is None for m in tokens), tokens[0]
assert final["finish_reason"] == "length", final
assert final["usage"]["completion_tokens"] == 6 and final["usage"]["prompt_tokens"] >= 2, final
PY
deltas=$(/usr/bin/python3 -c 'import json,sys; print("".join(json.loads(l)["text"] for l in sys.argv[1].splitlines()), end="")' "$json_stream")
expect_exit 0 "generate text" -- "$cli" generate --temperature 0 --max-tokens 6 --ignore-eos "The kernel"
[[ $out == "$deltas" ]] || fail "text output '$out' differs from the JSON deltas '$deltas'"
expect_exit 0 "generate --chat --stats" -- "$cli" generate --chat --no-think --max-tokens 3 --ignore-eos --stats "Hi"
expect_contains "$err" "[finish: length; prompt" "--stats line"
expect_exit 0 "generate with sampling flags" -- "$cli" generate --max-tokens 4 --temperature 0.8 --top-k 40 \
  --top-p 0.9 --min-p 0.05 --repetition-penalty 1.1 --seed 42 --stop "zzzz" --json "Once"
tail -n1 <<<"$out" | grep -q '"seed":42[,}]' || fail "the final message does not report seed 42: $(tail -n1 <<<"$out")"
expect_exit 0 "generate -n (short form), options after the prompt" -- "$cli" generate "Once" -n 3 --ignore-eos --json
pyjson 'assert d["usage"]["completion_tokens"] == 3 and d["finish_reason"] == "length", d' "$(tail -n1 <<<"$out")" ||
  fail "-n 3: $(tail -n1 <<<"$out")"
# Greedy is deterministic: a piece of the text above is met again and stops the stream.
stop=$(/usr/bin/python3 -c 'import sys; print(sys.argv[1][2:5], end="")' "$deltas")
[[ -n $stop ]] || fail "the 6-token text '$deltas' is too short to take a stop string from"
expect_exit 0 "stop sequence" -- "$cli" generate --json --temperature 0 -n 40 --ignore-eos --stop "$stop" "The kernel"
pyjson 'assert d["finish_reason"] == "stop_sequence" and d["stop_sequence"] == sys.argv[2], d' "$(tail -n1 <<<"$out")" "$stop" ||
  fail "stop '$stop': $(tail -n1 <<<"$out")"
pass "generate: JSON stream order and usage, text = deltas, --chat, --stats, sampling flags"

# ---- sessions: the second request reuses the cached positions
expect_exit 0 "sessions create" -- "$cli" sessions create --max-context 256
sid=$out
[[ -n $sid && $sid != *" "* ]] || fail "sessions create printed '$sid'"
expect_exit 0 "generate in session" -- "$cli" generate --json --session "$sid" --max-tokens 3 --ignore-eos "Once upon a time"
pyjson 'assert d["usage"]["cached_tokens"] == 0, d' "$(tail -n1 <<<"$out")" || fail "first turn: $(tail -n1 <<<"$out")"
expect_exit 0 "continue session" -- "$cli" generate --json --session "$sid" --append --max-tokens 3 --ignore-eos " there"
pyjson 'assert d["usage"]["cached_tokens"] > 0, d' "$(tail -n1 <<<"$out")" || fail "continued turn did not reuse the cache: $(tail -n1 <<<"$out")"
expect_exit 0 "sessions create (a prompt-cache name)" -- "$cli" sessions create --max-context 64 --id prompt-cache-0-42
expect_exit 0 "sessions list" -- "$cli" sessions list
expect_contains "$out" "$sid" "sessions list shows the session"
[[ $(head -n1 <<<"$out") == *OWNER* && $(grep "$sid" <<<"$out") == *" $(id -un) "* ]] || fail "sessions list: no owner: $out"
[[ $out != *prompt-cache-0-42* ]] || fail "sessions list shows the HTTP prompt cache: $out"
expect_contains "$out" "(1 HTTP prompt cache," "sessions list counts the hidden prompt cache"
expect_exit 0 "sessions list --all" -- "$cli" sessions list --all
expect_contains "$out" "prompt-cache-0-42" "sessions list --all"
expect_exit 0 "sessions rm the prompt cache" -- "$cli" sessions rm prompt-cache-0-42
expect_exit 0 "sessions show" -- "$cli" sessions show "$sid" --json
pyjson 'assert d["session"]["positions"] > 0 and d["session"]["max_context"] == 256, d' "$out" || fail "sessions show: $out"
expect_exit 0 "sessions rm" -- "$cli" sessions rm "$sid"
expect_contains "$out" "deleted $sid" "sessions rm output"
expect_exit 1 "show deleted session" -- "$cli" sessions show "$sid"
expect_contains "$err" "NOT_FOUND" "unknown session error"
expect_exit 1 "generate in unknown session" -- "$cli" generate --session nosuchsession hi
pass "sessions create/list (owner, prompt caches hidden unless --all)/show/rm; continued session reports cached_tokens; unknown session exit 1"

# ---- forward
expect_exit 0 "forward" -- "$cli" forward --top-k 3 "Hello"
[[ $(grep -cE '^ +[0-9]+ +[0-9]+ ' <<<"$out") -eq 3 ]] || fail "forward --top-k 3 printed: $out"
expect_exit 0 "forward --json" -- "$cli" forward --top-k 3 --json "Hello"
pyjson 'assert len(d["top"]) == 3 and d["top"][0]["logprob"] >= d["top"][2]["logprob"], d' "$out" || fail "forward --json: $out"
pass "forward --top-k table and JSON"

# ---- chat with piped stdin: two turns in one session, deleted afterwards
expect_exit 0 "chat" -- sh -c "printf 'Hi there\nTell me more\n' | '$cli' chat --json --no-think --max-tokens 3 --ignore-eos"
[[ $(wc -l <<<"$out") -eq 2 ]] || fail "chat --json printed $(wc -l <<<"$out") lines for 2 turns: $out"
pyjson 'assert d["user"] == "Tell me more" and d["usage"]["cached_tokens"] > 0, d' "$(tail -n1 <<<"$out")" ||
  fail "second chat turn did not reuse the session: $(tail -n1 <<<"$out")"
expect_exit 0 "sessions list after chat" -- "$cli" sessions list --json
pyjson 'assert not d.get("sessions"), d' "$out" || fail "chat left its session behind: $out"
pass "chat: piped turns share a session (cached tokens), session deleted at the end"

# ---- chat: 5 turns, each after the first computes only its user message and the
# template's framing, never the previous reply again (issue 24: re-templating
# the conversation dropped the reply's think block, so every turn recomputed it)
turns=("Hi there" "What is XDP?" "And BPF maps?" "Thanks a lot" "Bye now")
printf '%s\n' "${turns[@]}" | "$cli" chat --stats -n 3 >"$tmp/chat5.out" 2>"$tmp/chat5.err" ||
  fail "5-turn chat: exit $?: $(cat "$tmp/chat5.err")"
mapfile -t finish_lines < <(grep '^\[finish: ' "$tmp/chat5.err")
[[ ${#finish_lines[@]} -eq 5 ]] || fail "5-turn chat printed ${#finish_lines[@]} --stats lines: $(cat "$tmp/chat5.err")"
grep -q '<think>\|</think>' "$tmp/chat5.out" && fail "chat printed raw think tags: $(cat "$tmp/chat5.out")"
for i in 0 1 2 3 4; do
  line=${finish_lines[$i]}
  [[ $line =~ prompt\ ([0-9]+)\ tokens\ \(([0-9]+)\ cached\) ]] || fail "no prompt count in: $line"
  computed=$((BASH_REMATCH[1] - BASH_REMATCH[2]))
  if ((i == 0)); then
    ((BASH_REMATCH[2] == 0)) || fail "the first turn of a new session reused $line"
    continue
  fi
  # The framing closes the previous reply (<|im_end|>), opens the user turn and
  # the assistant turn with the empty think block of thinking off.
  framing=$'<|im_end|>\n<|im_start|>user\n'"${turns[$i]}"$'<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n'
  expect_exit 0 "tokenize the framing" -- "$cli" tokenize -- "$framing"
  framed=$(wc -w <<<"$out")
  # Plus the reply's last token when it was not <|im_end|> itself: generated, not yet fed.
  prev=${finish_lines[$((i - 1))]}
  # (An EOS reply ended with <|im_end|> or <|endoftext|>: one of the two counts.)
  want=$((framed + 1))
  [[ $prev != "[finish: length"* && $computed -eq $framed ]] && want=$framed
  ((computed == want)) ||
    fail "chat turn $((i + 1)) computed $computed prompt tokens, want $want (user message + framing): $line"
done
pass "chat: 5 turns, each after the first computes only the user message and the template's framing"

# ---- chat checks --session before the first message
expect_exit 1 "chat in an unknown session" -- sh -c "'$cli' chat --session nosuchsession </dev/null"
expect_contains "$err" "NOT_FOUND" "chat --session checked at start"
expect_exit 2 "chat with a bad option value" -- sh -c "'$cli' chat --top-p 7 </dev/null"

# ---- chat on a terminal (script(1) gives it a pty): libedit line editing and
# history (Up recalls the last line), /commands not sent to the model
export HOME=$tmp/home
mkdir -p "$HOME"
printf 'Hi there\r\033[A\r/session\r/frob\r/help\r/stats\r/bye\r' |
  timeout 120 script -q -e -c "'$cli' chat --json --no-think -n 3 --ignore-eos" /dev/null >"$tmp/chat.tty" ||
  fail "chat on a pty: exit $?: $(cat -v "$tmp/chat.tty")"
tty_out=$(tr -d '\r' <"$tmp/chat.tty")
[[ $(grep -c '"user":"Hi there"' <<<"$tty_out") -eq 2 ]] || fail "Up + Enter did not resend the last message: $tty_out"
grep -q '"cached_tokens":[1-9][0-9]*.*"user":"Hi there"' <<<"$tty_out" || fail "the recalled turn did not reuse the session: $tty_out"
grep -qE '^session s-[0-9a-f]+: [0-9]+ of [0-9]+ positions, KV ' <<<"$tty_out" || fail "/session: $tty_out"
expect_contains "$tty_out" "unknown command /frob" "/frob is not sent to the model"
expect_contains "$tty_out" "/clear           a new conversation" "/help"
expect_contains "$tty_out" "[finish: length; prompt" "/stats"
grep -q '"user":"/' <<<"$tty_out" && fail "a /command was sent to the model: $tty_out"
grep -qx 'Hi\\040there' "$HOME/.qwen3_bpf_history" || fail "history not saved: $(cat "$HOME/.qwen3_bpf_history")"
expect_exit 0 "sessions after the pty chat" -- "$cli" sessions list --json
pyjson 'assert not d.get("sessions"), d' "$out" || fail "the pty chat left its session behind: $out"
pass "chat on a terminal: Up recalls the last line, /session /help /stats /bye, unknown /cmd not sent, history saved"

# ---- chat on a terminal (tmux): Ctrl-C during a reply cancels only that reply;
# Ctrl-C at the prompt ends the chat (exit 130) and frees its session
tmux_sock=$tmp/tmux.sock  # in $tmp: the scratch cleanup removes it
tmux -S "$tmux_sock" -f /dev/null new-session -d -x 160 -y 40 \
  "QWEN3_BPF_SOCKET='$sock' '$cli' chat --no-think -n 100000 --ignore-eos; echo \$? >'$tmp/chat.rc'"
pane() { tmux -S "$tmux_sock" capture-pane -p -S -200 | grep -v '^$'; }
wait_pane() {  # wait_pane WHAT CONDITION: up to 10 s for the bash condition on $(pane)
  for _ in $(seq 100); do eval "$2" && return 0; sleep 0.1; done
  local screen
  screen=$(pane 2>&1)
  tmux -S "$tmux_sock" kill-server 2>/dev/null || true
  fail "tmux chat: no $1: $screen"
}
# (capture-pane drops trailing blanks: the prompt ">>> " shows as ">>>")
wait_pane "first prompt" '[[ $(pane) == *">>>"* ]]'
tmux -S "$tmux_sock" send-keys "Hello" Enter
wait_pane "reply text" '[[ $(pane | grep -v "^>>>" | grep -c .) -ge 3 ]]'
tmux -S "$tmux_sock" send-keys C-c
wait_pane "cancel line and a new prompt after Ctrl-C in a reply" \
  '[[ $(pane) == *"[finish: cancelled (Ctrl-C); completion "* && $(pane | tail -n 1) == ">>>" ]]'
if [[ -e $tmp/chat.rc ]]; then
  tmux -S "$tmux_sock" kill-server 2>/dev/null || true
  fail "Ctrl-C during a reply ended the chat (exit $(cat "$tmp/chat.rc"))"
fi
tmux -S "$tmux_sock" send-keys C-c
for _ in $(seq 100); do [[ -s $tmp/chat.rc ]] && break; sleep 0.1; done
tmux -S "$tmux_sock" kill-server 2>/dev/null || true
[[ $(cat "$tmp/chat.rc" 2>/dev/null) == 130 ]] || fail "chat after Ctrl-C at the prompt: exit '$(cat "$tmp/chat.rc" 2>/dev/null)'"
expect_exit 0 "sessions after Ctrl-C at the prompt" -- "$cli" sessions list --json
pyjson 'assert not d.get("sessions"), d' "$out" || fail "Ctrl-C at the prompt left the session behind: $out"
pass "chat on a terminal: Ctrl-C in a reply cancels it (the chat goes on), at the prompt exits 130 and frees the session"

# ---- feedback during prefill: a spinner on a terminal's stderr, nothing when piped
long_prompt=$(/usr/bin/python3 -c 'print(" ".join(f"word{i}" for i in range(400)))')
script -q -e -c "'$cli' generate -n 1 --stats '$long_prompt'" /dev/null >"$tmp/spin.tty" || fail "generate on a pty"
grep -q 'prefill [|/\\-] [0-9.]* s' "$tmp/spin.tty" || fail "no prefill spinner on a terminal: $(cat -v "$tmp/spin.tty" | head -c 400)"
grep -q $'\r\033\[K' "$tmp/spin.tty" || fail "the spinner line is not erased"
expect_exit 0 "generate piped" -- "$cli" generate -n 1 "$long_prompt"
[[ $err != *prefill* ]] || fail "spinner on a piped stderr: $err"
pass "prefill spinner on a terminal (erased before the text), nothing when piped"

# ---- Ctrl-C cancels a running generation
"$cli" generate --max-tokens 100000 --ignore-eos "Count" >"$tmp/long.out" 2>"$tmp/long.err" &
gen_pid=$!
for _ in $(seq 300); do [[ -s $tmp/long.out ]] && break; sleep 0.1; done
[[ -s $tmp/long.out ]] || fail "the long generation printed nothing in 30 s"
kill -INT $gen_pid
rc=0
for _ in $(seq 100); do kill -0 $gen_pid 2>/dev/null || break; sleep 0.1; done
kill -0 $gen_pid 2>/dev/null && fail "generate still runs 10 s after Ctrl-C"
wait $gen_pid || rc=$?
[[ $rc -eq 130 ]] || fail "generate after Ctrl-C exited $rc, want 130; stderr: $(cat "$tmp/long.err")"
grep -q "finish: cancelled" "$tmp/long.err" || fail "no cancel note on stderr: $(cat "$tmp/long.err")"
# The daemon sees the cancellation at its next engine step: allow it a few
# seconds on a loaded machine.
for _ in $(seq 50); do
  expect_exit 0 "status after cancel" -- "$cli" status --json
  pyjson 'assert int(d["requests"]["cancelled"]) >= 1 and d["active_streams"] == 0, d["requests"]' "$out" 2>/dev/null && break
  sleep 0.2
done
pyjson 'assert int(d["requests"]["cancelled"]) >= 1 and d["active_streams"] == 0, d["requests"]' "$out" ||
  fail "the daemon did not count/finish the cancelled stream within 10 s: $out"
pass "Ctrl-C cancels the stream (exit 130), the daemon counts it and ends the stream"

# ---- errors from the daemon
expect_exit 2 "bad token id" -- "$cli" detokenize 999999999
expect_contains "$err" "INVALID_ARGUMENT" "bad id error code"
expect_exit 2 "id outside the vocabulary" -- "$cli" generate --ids "99999999"
expect_exit 2 "invalid UTF-8 prompt" -- "$cli" generate $'ab\xffcd'
[[ $err != *libprotobuf* ]] || fail "a raw libprotobuf line: $err"
expect_exit 1 "--json daemon error" -- "$cli" --json sessions show nosuchsession
pyjson 'assert d["code"] == "not_found" and d["exit_code"] == 1 and "nosuchsession" in d["message"], d' "$err" ||
  fail "--json error object: $err"
pass "daemon errors: INVALID_ARGUMENT exit 2, others exit 1, with the status code name; --json errors are JSON"

# ---- an unprivileged user is refused
expect_exit 4 "nobody" -- setpriv --reuid=nobody --regid=nogroup --clear-groups "$cli" status
expect_contains "$err" "permission denied" "nobody's message"
# With the socket opened to everyone, the daemon's own SO_PEERCRED check refuses
# nobody by closing the connection; the CLI must say so too.
chmod 0666 "$sock"
expect_exit 4 "nobody past the socket mode" -- setpriv --reuid=nobody --regid=nogroup --clear-groups "$cli" status
expect_contains "$err" "permission denied: qwen3-bpfd closed the connection (credential check)" "peer-credential refusal"
chmod 0600 "$sock"
pass "user nobody: permission denied, exit 4 (socket mode, and the daemon's credential check)"

# ---- verify: pass, compile error with line, verifier class, wrong verdict
# The same small program and fixtures the systemd container test uses.
cp "$(dirname "$0")/../lib/xdp/drop_arp.c" "$tmp/good.c"
cp "$(dirname "$0")/../lib/xdp/drop_arp.fixtures.json" "$tmp/fixtures.json"
sed 's/XDP_DROP/XDP_PASS/; s/"expected_action": "XDP_PASS"}]/"expected_action": "XDP_DROP"}]/' "$tmp/fixtures.json" >"$tmp/wrong.json"
sed '13s/.*/\t\treturn XDP_PASS +;/' "$tmp/good.c" >"$tmp/compile_error.c"
sed 's/if ((void \*)(eth + 1) > data_end)/if ((void *)eth > data_end)/' "$tmp/good.c" >"$tmp/bounds.c"
expect_exit 0 "verify good" -- "$cli" verify "$tmp/good.c" --fixtures "$tmp/fixtures.json"
expect_contains "$out" "good.c: PASS" "verify pass line"
expect_contains "$out" "fixtures: 2 of 2 passed" "verify fixtures line"
expect_exit 1 "verify compile error" -- "$cli" verify "$tmp/compile_error.c"
expect_contains "$out" "FAIL at stage compile" "compile failure"
grep -qE "compile_error\.c:1[3-5](:[0-9]+)?: " <<<"$out" || fail "compile error without its line number: $out"
expect_exit 1 "verify bounds" -- "$cli" verify "$tmp/bounds.c" --fixtures "$tmp/fixtures.json"
expect_contains "$out" "FAIL at stage verify" "verifier failure"
expect_contains "$out" "verifier: rejected (packet_bounds)" "verifier class"
expect_exit 1 "verify wrong verdicts" -- "$cli" verify "$tmp/good.c" --fixtures "$tmp/wrong.json"
expect_contains "$out" "FAIL at stage behaviour" "behaviour failure"
expect_contains "$out" "FAIL  arp: expected XDP_PASS, got XDP_DROP" "fixture expected/got"
expect_exit 1 "verify --json" -- "$cli" verify "$tmp/bounds.c" --json
pyjson 'r = d["result"]; assert r["decision_name"] == "fail" and r["stage_name"] == "verify", r
assert r["decision"] == "fail" and r["first_failed_stage"] == "verify" and r["verifier_class"] == "packet_bounds", r' "$out" ||
  fail "verify --json: $out"
expect_exit 0 "verify --json pass" -- "$cli" verify "$tmp/good.c" --fixtures "$tmp/fixtures.json" --json
pyjson 'r = d["result"]; assert r["decision"] == "pass" and r["first_failed_stage"] == "none", r' "$out" ||
  fail "verify --json pass: $out"
expect_exit 2 "verify missing file" -- "$cli" verify "$tmp/nonexistent.c"
expect_contains "$err" "No such file or directory" "verify missing file gives the reason"
pass "verify: pass (exit 0), compile error with line, verifier class, fixture expected/got, --json (exit 1)"

# ---- xdp-gen with a random model: a clean 'not solved'
expect_exit 1 "xdp-gen" -- "$cli" xdp-gen "drop all ARP packets" --attempts 1 --max-tokens 16 --fixtures "$tmp/fixtures.json"
expect_contains "$out" "== attempt 1 of 1" "xdp-gen attempt header"
expect_contains "$out" "== not solved after 1 attempt" "xdp-gen verdict"
pass "xdp-gen reports each attempt and 'not solved' (exit 1)"

# ---- the daemon stops cleanly on SIGTERM
kill -TERM $daemon_pid
rc=0
for _ in $(seq 150); do kill -0 $daemon_pid 2>/dev/null || break; sleep 0.1; done
kill -0 $daemon_pid 2>/dev/null && fail "daemon still running 15 s after SIGTERM"
wait $daemon_pid || rc=$?
daemon_pid=
[[ $rc -eq 0 ]] || fail "daemon exited $rc after SIGTERM: $(tail -n 20 "$tmp/daemon.log")"
expect_exit 3 "after stop" -- "$cli" status
expect_contains "$err" "qwen3-bpfd --socket $sock" "the hint starts the daemon on the socket asked for"
pass "daemon stopped on SIGTERM; the CLI then says it is not running (exit 3) and how to start it"
echo "all CLI daemon tests passed"
