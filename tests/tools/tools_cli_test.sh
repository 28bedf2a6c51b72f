#!/usr/bin/env bash
# The command lines of qwen3-bpfd and the tools (CLI11): --help and --version
# exit 0, an unknown option exits 2 naming it; mkmodel refuses a non-empty
# directory without --force, and so does qwen3-bpf-quantize; qwen3-bpf-run
# reports load/prefill/decode timings.
# usage: tools_cli_test.sh QWEN3_BPFD RUN BENCH MKMODEL MODEL_DIR TOKENIZER_DIR QUANTIZE
set -euo pipefail
daemon=$1 run=$2 bench=$3 mkmodel=$4
model=$(realpath "$5")
tokenizer=$6 quantize=$7
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/../client/test_lib.sh"

for prog in "$daemon" "$run" "$bench" "$mkmodel" "$quantize"; do
  name=$(basename "$prog")
  expect_exit 0 "$name --help" -- "$prog" --help
  expect_contains "$out" "usage: $name" "$name --help"
  expect_exit 0 "$name -h" -- "$prog" -h
  expect_exit 0 "$name --version" -- "$prog" --version
  [[ $out =~ ^$name\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "$name --version printed '$out'"
  expect_exit 2 "$name unknown option" -- "$prog" --frobnicate
  expect_contains "$err" "--frobnicate" "$name names the unknown option"
  expect_contains "$err" "$name --help" "$name points to --help"
done
expect_exit 2 "qwen3-bpfd option without its value" -- "$daemon" --socket
pass "qwen3-bpfd, run, bench, mkmodel, quantize: --help/-h, --version, unknown option exit 2"

# ---- mkmodel never overwrites a model directory by accident
mkdir -p "$tmp/taken"
echo '{"downloaded": true}' >"$tmp/taken/config.json"
expect_exit 1 "mkmodel into a non-empty directory" -- "$mkmodel" "$tmp/taken" --preset tiny --tokenizer-dir "$tokenizer"
expect_contains "$err" "not empty" "refusal message"
expect_contains "$err" "--force" "refusal names --force"
[[ $(cat "$tmp/taken/config.json") == '{"downloaded": true}' ]] || fail "mkmodel touched the directory it refused"
[[ ! -e $tmp/taken/model.safetensors ]] || fail "mkmodel wrote weights into the directory it refused"
expect_exit 0 "mkmodel --force" -- "$mkmodel" "$tmp/taken" --preset tiny --tokenizer-dir "$tokenizer" --force
[[ -s $tmp/taken/model.safetensors ]] || fail "mkmodel --force wrote no weights"
mkdir "$tmp/empty"
expect_exit 0 "mkmodel into an empty directory" -- "$mkmodel" "$tmp/empty" --preset tiny --tokenizer-dir "$tokenizer"
expect_exit 2 "mkmodel without --preset" -- "$mkmodel" "$tmp/new"
expect_exit 2 "mkmodel negative seed" -- "$mkmodel" "$tmp/new" --preset tiny --seed -3
expect_contains "$err" "non-negative integer" "negative seed message"
pass "mkmodel: refuses a non-empty OUT (untouched), --force and empty/new directories work"

# ---- qwen3-bpf-quantize: one calibration source, never over a non-empty OUT_DIR
expect_exit 2 "quantize without a calibration source" -- "$quantize" "$model" "$tmp/q4"
expect_contains "$err" "--calib-text" "quantize names the calibration options"
mkdir "$tmp/q4taken" && echo keep >"$tmp/q4taken/notes.txt"
expect_exit 1 "quantize into a non-empty directory" -- "$quantize" "$model" "$tmp/q4taken" --calib-random 1
expect_contains "$err" "--force" "quantize refusal names --force"
[[ $(ls "$tmp/q4taken") == notes.txt ]] || fail "quantize touched the directory it refused"
expect_exit 1 "quantize with a study-only recipe" -- "$quantize" "$model" "$tmp/q4" --calib-random 1 --recipe q4g32+bpfq4
expect_contains "$err" "study-only" "recipe refusal"
pass "qwen3-bpf-quantize: refuses a missing calibration, a non-empty OUT_DIR and study-only recipes"

# ---- qwen3-bpf-run: timings like llama-cli's, options before or after, short forms
expect_exit 0 "run with timings" -- "$run" --model "$model" --backend reference -p "The kernel" -n 4
expect_contains "$out" "generated:" "run output"
for what in "load:" "prefill:" "decode:" "total:"; do expect_contains "$err" "$what" "run timings"; done
grep -qE '^prefill: +[0-9.]+ ms +[0-9]+ tokens +[0-9.]+ tokens/s' <<<"$err" || fail "prefill line: $err"
grep -qE '^decode: +[0-9.]+ ms +3 tokens +[0-9.]+ tokens/s +\([0-9.]+ ms/token\)' <<<"$err" || fail "decode line: $err"
expect_exit 0 "run --json" -- "$run" --json -n 3 --backend reference --model "$model" --prompt "The kernel"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
t = d["timings"]
assert len(d["generated"]) == 3 and t["decode_tokens"] == 2 and t["prompt_tokens"] >= 2, d
assert t["load_ms"] > 0 and t["prefill_ms"] > 0 and t["decode_ms"] > 0, t
' "$out" || fail "run --json timings: $out"
expect_exit 2 "run with both --ids and --prompt" -- "$run" --model "$model" --ids 1 2 --prompt x
expect_exit 2 "run bad number" -- "$run" --model "$model" --ids 1 --generate many
pass "qwen3-bpf-run: load/prefill/decode timings on stderr and in --json; usage errors exit 2"
echo "all tools CLI tests passed"
