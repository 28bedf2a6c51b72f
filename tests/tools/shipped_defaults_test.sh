#!/usr/bin/env bash
# The shipped model (qwen3-kerneldoc) through a private qwen3-bpfd: a request
# that sets no sampling field samples with all of its generation_config.json
# (temperature 0.7, top_k 20, top_p 0.9, repetition_penalty 1.1), and one
# flag changes only its own field. Issue 24: the penalty was dropped, and
# --seed alone meant greedy.
# usage: shipped_defaults_test.sh QWEN3_BPF QWEN3_BPFD TRAINED_MODEL_DIR
set -euo pipefail
cli=$1
daemon=$2
model=$(realpath "$3")
here=$(dirname "$0")
[[ -f $model/generation_config.json ]] || { echo "FAIL: no model at $model" >&2; exit 1; }
source "$here/../lib/daemon_scratch.sh"
source "$here/../client/test_lib.sh"
/usr/bin/python3 -c 'import json,sys; g=json.load(open(sys.argv[1])); assert g["repetition_penalty"] == 1.1, g' \
  "$model/generation_config.json" || fail "the shipped generation_config.json no longer sets repetition_penalty 1.1"

start_test_daemon "$daemon" "$model"
expect_exit 0 "status --wait" -- "$cli" status --wait --timeout 600
prompt="struct sk_buff is"

# What the daemon reports it used: every default, the seed asked for.
expect_exit 0 "generate --seed" -- "$cli" generate --seed 42 -n 24 --stats "$prompt"
seeded_42=$out
expect_contains "$err" "temperature 0.7, top_k 20, top_p 0.9, repetition_penalty 1.1, seed 42" "--seed alone: the model's defaults"
expect_exit 0 "generate --seed 43" -- "$cli" generate --seed 43 -n 24 "$prompt"
[[ $out != "$seeded_42" ]] || fail "seeds 42 and 43 gave the same text (is it greedy?): $out"
expect_exit 0 "generate --seed 42 again" -- "$cli" generate --seed 42 -n 24 "$prompt"
[[ $out == "$seeded_42" ]] || fail "seed 42 twice gave different texts: '$seeded_42' / '$out'"
pass "--seed alone samples with every generation_config default, reproducibly"

# The penalty applies by default: greedy with the default penalty = greedy with
# 1.1 stated, and differs from greedy without it. --ignore-eos: the penalty can
# only show once tokens repeat, so the comparison must not depend on where the
# model would end its text.
expect_exit 0 "generate --greedy" -- "$cli" generate --greedy --ignore-eos -n 48 --stats "$prompt"
greedy_default=$out
expect_contains "$err" "greedy, repetition_penalty 1.1" "--greedy keeps the model's penalty"
expect_exit 0 "generate --greedy --repetition-penalty 1.1" -- "$cli" generate --greedy --ignore-eos --repetition-penalty 1.1 -n 48 "$prompt"
[[ $out == "$greedy_default" ]] || fail "default penalty != stated 1.1: '$greedy_default' / '$out'"
expect_exit 0 "generate --greedy --repetition-penalty 1" -- "$cli" generate --greedy --ignore-eos --repetition-penalty 1 -n 48 "$prompt"
[[ $out != "$greedy_default" ]] || fail "the default generation did not apply the penalty (same text as penalty 1): $out"
pass "the default generation applies repetition_penalty 1.1 (greedy: same as stated, unlike 1)"
