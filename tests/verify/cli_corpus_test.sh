#!/usr/bin/env bash
# The whole XDP corpus through the real daemon and CLI (`qwen3-bpf verify --json`),
# checked against each NAME.json; then the generate-verify-repair loop
# (`qwen3-bpf xdp-gen`) end to end with the tiny random test model, whose
# answers are garbage and must be reported cleanly.
# usage: cli_corpus_test.sh QWEN3_BPF QWEN3_BPFD MODEL_DIR CORPUS_DIR
set -euo pipefail
cli=$1
daemon=$2
model=$(realpath "$3")
corpus=$(realpath "$4")
[[ -f $model/config.json ]] || { echo "FAIL: no model at $model" >&2; exit 1; }
source "$(dirname "$0")/../lib/daemon_scratch.sh"
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  [[ -f $tmp/daemon.log ]] && { echo "---- daemon log (tail)"; tail -n 30 "$tmp/daemon.log"; } >&2
  exit 1
}
export QWEN3_BPF_SOCKET=$sock

: >"$tmp/empty.conf"
"$daemon" --foreground --config "$tmp/empty.conf" --model "$model" --socket "$sock" \
  --state-dir "$tmp/state" --threads 2 >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 300); do
  [[ -S $sock ]] && break
  kill -0 $daemon_pid 2>/dev/null || fail "daemon exited"
  sleep 0.1
done
"$cli" status --wait --timeout 300 >/dev/null || fail "daemon did not become ready"

/usr/bin/python3 - "$cli" "$corpus" "$tmp" <<'PY' || fail "corpus through the CLI"
import glob, json, os, secrets, subprocess, sys

cli, corpus, tmp = sys.argv[1:4]
marker = "CLI-SECRET-" + secrets.token_hex(12)
secret_path = os.path.join(tmp, "secret.h")
with open(secret_path, "w") as f:
    f.write("int leaked; /* %s */\n" % marker)
os.chmod(secret_path, 0o644)
needles = [marker] + [l for f in ("/etc/shadow", "/etc/passwd") if os.path.exists(f)
                      for l in open(f, errors="replace").read().splitlines() if len(l) >= 8]

def xdp_prog_ids():
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    return {p["id"] for p in json.loads(out.stdout or "[]") if p.get("type") == "xdp"}

before = xdp_prog_ids()
failures, checked, skipped = [], 0, []
for json_path in sorted(glob.glob(os.path.join(corpus, "*.json"))):
    name = os.path.basename(json_path)[:-5]
    spec = json.load(open(json_path))
    c_path = os.path.join(corpus, spec.get("program", name + ".c"))
    if "options" in spec:
        # Pipeline options are the daemon's configuration, not part of the request.
        skipped.append(name)
        continue
    src = open(c_path).read().replace("@SECRET@", secret_path)
    if "pad_to_bytes" in spec:
        src += "/*" + "x" * (spec["pad_to_bytes"] - len(src) - 5) + "*/\n"
    prog = os.path.join(tmp, name + ".c")
    open(prog, "w").write(src)
    fixtures = os.path.join(tmp, name + ".fixtures.json")
    # The spec's fixtures as a user's file: a bare array, {"fixtures", "maps"} or a
    # BPF-Guardian tests.json, unchanged.
    json.dump(spec["fixtures"], open(fixtures, "w"))
    run = subprocess.run([cli, "verify", prog, "--fixtures", fixtures, "--json"], capture_output=True, text=True)
    e = spec["expect"]
    want_exit = 0 if e["decision"] == "pass" else 1
    problems = []
    if run.returncode != want_exit:
        problems.append("exit %d (want %d): %s" % (run.returncode, want_exit, run.stderr.strip()[:300]))
    try:
        r = json.loads(run.stdout)["result"]
    except Exception as ex:
        failures.append("%s: no JSON result (%s): %s" % (name, ex, run.stderr.strip()[:300]))
        continue
    got = (r.get("decision_name"), r.get("stage_name"), r.get("verifier_class_name"))
    want = (e["decision"], e["stage"], e["class"])
    if got != want:
        problems.append("got %s, want %s (%s)" % (got, want, r.get("summary")))
    if e.get("stage") == "verify" and "line" in e and r.get("verifier_line") != e["line"]:
        problems.append("verifier_line %s, want %s" % (r.get("verifier_line"), e["line"]))
    if "failing_fixtures" in e:
        failing = sorted(f["name"] for f in r.get("fixtures", []) if not f.get("passed"))
        if failing != sorted(e["failing_fixtures"]):
            problems.append("failing fixtures %s, want %s" % (failing, e["failing_fixtures"]))
    # Every field of the result crosses the gRPC mapping: the fixture counts (0 on a
    # pass unless the spec says otherwise), each fixture's ran flag, and the diagnosis.
    for key in ("fixtures_not_run", "fixtures_not_checked"):
        if (e["decision"] == "pass" or key in e) and r.get(key, 0) != e.get(key, 0):
            problems.append("%s %s, want %s" % (key, r.get(key, 0), e.get(key, 0)))
    not_run = [f["name"] for f in r.get("fixtures", []) if not f.get("ran")]
    if len(not_run) != r.get("fixtures_not_run", 0):
        problems.append("fixtures without ran=true %s, but fixtures_not_run %s" % (not_run, r.get("fixtures_not_run", 0)))
    if e["decision"] != "pass" and not (r.get("error_id", "").startswith("BPFV-") and r.get("next_action")):
        problems.append("no diagnosis (error_id %r, next_action %r)" % (r.get("error_id"), r.get("next_action")))
    text = run.stdout + run.stderr
    if any(n in text for n in needles):
        problems.append("secret material in the output")
    checked += 1
    if problems:
        failures.append(name + ": " + "; ".join(problems))

leaked = xdp_prog_ids() - before
if leaked:
    failures.append("XDP programs left loaded: %s" % sorted(leaked))
print("corpus through the CLI: %d programs checked, %d failures; not sent (they set pipeline options, the daemon's configuration): %s"
      % (checked, len(failures), ", ".join(skipped)))
for f in failures:
    print("  " + f)
sys.exit(1 if failures or checked < 40 else 0)
PY
echo "PASS: corpus classified as expected through qwen3-bpf verify"

# ---- generate-verify-repair with the random test model: garbage, reported cleanly.
set +e
"$cli" xdp-gen "drop IPv4 ICMP packets, pass everything else" --attempts 2 --max-tokens 48 --json >"$tmp/gen.json" 2>"$tmp/gen.err"
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "xdp-gen exit $rc (want 1: not solved): $(cat "$tmp/gen.err")"
/usr/bin/python3 - "$tmp/gen.json" "$tmp/gen.err" <<'PY' || fail "xdp-gen result: $(head -c 2000 "$tmp/gen.json")"
import json, sys
d = json.load(open(sys.argv[1]))
attempts = d["attempts"]
assert not d.get("solved"), d.get("solved")
assert len(attempts) == 2, len(attempts)
for a in attempts:
    r = a["result"]
    assert r["decision_name"] == "fail", r
    assert r["stage_name"] in ("answer", "policy", "compile", "verify", "behaviour"), r
    assert len(r["short_diagnostic"]) < 1200, r["short_diagnostic"]
    assert r["summary"], r
# The second attempt saw the first answer and the structured diagnostic.
m = attempts[1]["messages"]
assert [x["role"] for x in m] == ["system", "user", "assistant", "user"], [x["role"] for x in m]
assert m[2]["content"] == attempts[0]["completion"]
assert "did not pass" in m[3]["content"] and "Stage:" in m[3]["content"], m[3]["content"]
# Progress while it ran: a line per stage on stderr.
err = open(sys.argv[2]).read()
assert "[attempt 1/2] generat" in err and "[attempt 2/2]" in err, err
print("xdp-gen: 2 attempts, both failed cleanly:", [a["result"]["summary"][:80] for a in attempts])
PY
echo "PASS: xdp-gen runs the repair loop end to end"
