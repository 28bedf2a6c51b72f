#!/usr/bin/env bash
# `qwen3-bpf xdp-gen --generator-url`: the model's turns come from an external
# OpenAI-compatible endpoint (here a scripted Python server), the daemon (tiny
# test model, never asked to generate) compiles, verifies and repairs.
#  1. a compile error the engine cannot fix, then the fixed program: solved by
#     the model on turn 2, which saw turn 1 and the short diagnostic;
#  2. a missing bounds check: fixed by the engine, its diff in the result, one request;
#  3. errors: unreachable URL, HTTP 401 with the server's message, an answer without C.
# usage: xdp_gen_external_test.sh QWEN3_BPF QWEN3_BPFD MODEL_DIR CORPUS_DIR
set -euo pipefail
cli=$1
daemon=$2
model=$(realpath "$3")
corpus=$(realpath "$4")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/daemon_scratch.sh"
source "$here/../client/test_lib.sh"
server_pid=
trap 'if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi; stop_daemon_and_clean' EXIT

# The daemon only verifies here (the endpoint generates): the reference backend loads in a
# fraction of the BPF backend's time.
QWEN3_CLI_TEST_BACKEND=reference start_test_daemon "$daemon" "$model"
"$cli" status --wait --timeout 300 >/dev/null || fail "daemon did not become ready"

# The answers, built from the corpus's passing drop_icmp.c; its fixtures as a user's file.
/usr/bin/python3 - "$corpus" "$tmp" <<'PY'
import json, sys
corpus, tmp = sys.argv[1:3]
good = open(corpus + "/drop_icmp.c").read()
json.dump(json.load(open(corpus + "/drop_icmp.json"))["fixtures"], open(tmp + "/fixtures.json", "w"))
fence = lambda src: "Here is the program:\n```c\n" + src + "```\nIt drops ICMP."
undeclared = good.replace("ip->protocol == IPPROTO_ICMP", "classify_packet_kind(ip) == IPPROTO_ICMP")
unchecked = good.replace("\tif ((void *)(ip + 1) > data_end)\n\t\treturn XDP_PASS;\n", "")
assert undeclared != good and unchecked != good
json.dump([fence(undeclared), fence(good)], open(tmp + "/model_then_fix.json", "w"))
json.dump([fence(unchecked)], open(tmp + "/engine_fix.json", "w"))
json.dump([{"status": 401, "body": {"error": {"message": "invalid API key (scripted)", "type": "auth"}}}],
          open(tmp + "/unauthorized.json", "w"))
json.dump(["I cannot write that program, but XDP is a hook in the driver."], open(tmp + "/prose.json", "w"))
PY

# serve SCRIPT: a fresh scripted server; sets $port and $log.
serve() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  log=$tmp/$1.log
  rm -f "$tmp/port" "$log"
  /usr/bin/python3 "$here/scripted_openai_server.py" "$tmp/$1.json" "$log" "$tmp/port" &
  server_pid=$!
  for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.05; done
  port=$(cat "$tmp/port")
}
gen() {
  QWEN3_GENERATOR_API_KEY=test-key-123 "$cli" xdp-gen "drop IPv4 ICMP packets, pass everything else" \
    --fixtures "$tmp/fixtures.json" --generator-model scripted-model "$@"
}

serve model_then_fix
expect_exit 0 "broken then fixed" -- gen --attempts 2 --json --generator-url "http://127.0.0.1:$port/v1"
printf '%s' "$out" >"$tmp/out.json"
/usr/bin/python3 - "$tmp/out.json" "$log" <<'PY' || fail "broken then fixed: $out"
import json, sys
d = json.load(open(sys.argv[1]))
reqs = [json.loads(l) for l in open(sys.argv[2])]
a = d["attempts"]
assert d["solved"] and len(a) == 2, (d["solved"], len(a))
assert d["generator"] == {"url": d["generator"]["url"], "model": "scripted-model"}, d["generator"]
# Turn 1: the model's broken program, the engine tried and could not fix it.
r1 = a[0]["result"]
assert r1["decision_name"] == "fail" and r1["stage_name"] == "compile", r1
assert "classify_packet_kind" in a[0]["source"] and a[0]["fixed_by"] == "", a[0]
assert a[0]["repair"]["attempted"] and not a[0]["repair"]["fixed"], a[0]["repair"]
# Turn 2: the endpoint saw turn 1 and the short diagnostic, exactly as the in-daemon loop sends it.
assert len(reqs) == 2 and all(q["path"] == "/v1/chat/completions" for q in reqs), reqs
assert all(q["authorization"] == "Bearer test-key-123" and q["body"]["model"] == "scripted-model" for q in reqs)
assert reqs[0]["body"]["stream"] is False and reqs[0]["body"]["temperature"] == 0
m = reqs[1]["body"]["messages"]
assert [x["role"] for x in m] == ["system", "user", "assistant", "user"], m
assert m[2]["content"] == a[0]["completion"], m[2]
assert "did not pass" in m[3]["content"] and "Stage: compile" in m[3]["content"], m[3]
assert "classify_packet_kind" in m[3]["content"], m[3]
assert [x["content"] for x in a[1]["messages"]] == [x["content"] for x in m]
assert a[1]["result"]["decision_name"] == "pass" and a[1]["fixed_by"] == "model", a[1]
print("turn 1 failed at compile (engine: %s); turn 2 solved by the model" % a[0]["repair"]["note"])
PY
pass "external generator: broken answer, diagnostic fed back, fixed answer solves"

serve engine_fix
expect_exit 0 "engine fix" -- gen --attempts 2 --json --generator-url "http://127.0.0.1:$port"
printf '%s' "$out" >"$tmp/out.json"
/usr/bin/python3 - "$tmp/out.json" "$log" <<'PY' || fail "engine fix: $out"
import json, sys
d = json.load(open(sys.argv[1]))
a = d["attempts"]
assert d["solved"] and len(a) == 1 and a[0]["fixed_by"] == "engine", a
assert a[0]["result"]["stage_name"] == "verify", a[0]["result"]
rep = a[0]["repair"]
assert rep["fixed"] and any(l.startswith("+") and "(ip + 1) > data_end" in l for l in rep["diff"].splitlines()), rep
assert len(open(sys.argv[2]).readlines()) == 1
PY
expect_contains "$err" "asking scripted-model at http://127.0.0.1:$port" "progress names the endpoint"
pass "external generator: the engine's fix and diff kept, no second request"

serve unauthorized
expect_exit 4 "HTTP 401" -- gen --attempts 1 --generator-url "http://127.0.0.1:$port/v1"
expect_contains "$err" "answered HTTP 401: invalid API key (scripted)" "401 names the server's message"
serve prose
expect_exit 1 "no C source" -- gen --attempts 1 --json --generator-url "http://127.0.0.1:$port/v1/chat/completions"
expect_contains "$out" '"stage_name":"answer"' "an answer without C fails at stage answer"
expect_contains "$out" "no C source" "an answer without C says so"
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true
expect_exit 3 "unreachable" -- gen --attempts 1 --generator-url "http://127.0.0.1:$port/v1"
expect_contains "$err" "cannot reach the generator at http://127.0.0.1:$port/v1" "unreachable URL"
expect_exit 2 "https" -- gen --attempts 1 --generator-url "https://127.0.0.1:$port/v1"
expect_exit 2 "no model" -- "$cli" xdp-gen "x" --generator-url "http://127.0.0.1:$port/v1"
pass "external generator: unreachable, HTTP 401, no C source, https and a missing model are clear errors"
