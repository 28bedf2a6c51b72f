#!/usr/bin/env bash
# libFuzzer harnesses of the parsers that take outside input, built with
# clang-19 -fsanitize=fuzzer,address,undefined and run for a bounded time each.
# Part of .ci/run (not of scripts/run-tests.sh): builds and runs take ~1 minute
# per fuzzer plus the time given, one fuzzer per CPU at a time.
#
#   tests/fuzz/run-fuzzers.sh [SECONDS_EACH] [NAME...]     (default 60 s, all)
#
# Needs clang-19 and libclang-rt-19-dev (apt-get install libclang-rt-19-dev).
# Builds into ${QWEN3_FUZZ_BUILD:-build-fuzz}. Each fuzzer starts from its seed
# corpus tests/fuzz/corpus/NAME and first replays tests/fuzz/regressions/NAME
# (every crash found becomes an input there); new corpus entries go to the
# build directory, not into the tree. Exits non-zero if a fuzzer found a crash,
# leak, sanitizer report or timeout (its reproducer is in the build directory:
# crash-*, leak-*, timeout-*).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-60}
shift || true
out=${QWEN3_FUZZ_BUILD:-$root/build-fuzz}
mkdir -p "$out"
cxx=${QWEN3_FUZZ_CXX:-clang++-19}
if ! command -v "$cxx" >/dev/null; then echo "run-fuzzers: $cxx not found" >&2; exit 2; fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
    "$cxx" -x c++ -fsanitize=fuzzer - -o "$out/.probe" 2>/dev/null; then
  echo "run-fuzzers: $cxx cannot link -fsanitize=fuzzer; apt-get install libclang-rt-19-dev" >&2
  exit 2
fi

d=$root/daemon
common=("$d/common/mapped_file.cpp")
tokenizer=("$d"/tokenizer/*.cpp)
declare -A sources=(
  [safetensors]="${common[*]} $d/model/safetensors_file.cpp $d/model/tensor_view.cpp"
  [model_config]="${common[*]} $d/model/config_parser.cpp"
  [daemon_config]="${common[*]} $d/service/config.cpp $d/service/config_keys.cpp"
  [tokenizer]="${common[*]} ${tokenizer[*]}"
  [chat_template]="${common[*]} ${tokenizer[*]}"
  [fixtures]="${common[*]} $d/verify/fixtures.cpp"
  [policy]="${common[*]} $d/verify/policy.cpp"
)
declare -A libs=(
  [tokenizer]="$(pkg-config --libs libpcre2-8 icu-uc) -lspdlog -lfmt"
  [chat_template]="$(pkg-config --libs libpcre2-8 icu-uc) -lspdlog -lfmt"
)
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(safetensors model_config daemon_config tokenizer chat_template fixtures policy)

export QWEN3_FUZZ_TOKENIZER_DIR=${QWEN3_FUZZ_TOKENIZER_DIR:-$root/third_party/qwen3-tokenizer}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for name in "${names[@]}"; do
  [[ -n ${sources[$name]:-} ]] || { echo "run-fuzzers: no fuzzer '$name'" >&2; exit 2; }
done

# One harness: build, replay its regressions, fuzz. Its output goes to $out/NAME.log
# (printed whole when it ends, so that parallel runs do not interleave); the exit
# status says whether it found anything.
fuzz_one() {
  local name=$1 bin=$out/fuzz_$1
  echo "== $name: building $bin"
  # shellcheck disable=SC2086
  nice -n 5 "$cxx" -std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I"$d" "$root/tests/fuzz/fuzz_$name.cpp" \
    ${sources[$name]} ${libs[$name]:-} -o "$bin" || { echo "== $name: build FAILED"; return 1; }
  local corpus=$out/corpus_$name regressions=$root/tests/fuzz/regressions/$name
  mkdir -p "$corpus"
  if [[ -d $regressions ]] && compgen -G "$regressions/*" >/dev/null; then
    echo "== $name: replaying $(ls "$regressions" | wc -l) regression input(s)"
    (cd "$out" && "$bin" "$regressions"/*) || { echo "== $name: a regression input FAILED"; return 1; }
  fi
  echo "== $name: fuzzing for $seconds s"
  local seeds=("$root/tests/fuzz/corpus/$name")
  # The verify tests' XDP programs and fixtures are seeds too (not copied here).
  [[ $name == policy || $name == fixtures ]] && seeds+=("$root/tests/verify/corpus" "$root/tests/lib/xdp")
  (cd "$out" && "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "$corpus" "${seeds[@]}" 2>&1 | tail -n 25)
}

# One harness per CPU at a time (each build and each fuzzer is single-threaded):
# CI's wall time for the seven is about that of four.
jobs=${QWEN3_FUZZ_JOBS:-$(nproc)}
declare -A pid_of=()
failed=()
reap() {  # waits for one running harness, prints its log, records a failure
  local done_pid name status=0
  wait -n -p done_pid "${pid_of[@]}" || status=$?
  for name in "${!pid_of[@]}"; do
    [[ ${pid_of[$name]} == "$done_pid" ]] || continue
    ((status == 0)) || failed+=("$name")
    cat "$out/$name.log"
    unset "pid_of[$name]"
  done
}
for name in "${names[@]}"; do
  while ((${#pid_of[@]} >= jobs)); do reap; done
  fuzz_one "$name" >"$out/$name.log" 2>&1 &
  pid_of[$name]=$!
done
while ((${#pid_of[@]})); do reap; done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run-fuzzers: findings in: ${failed[*]} (reproducers in $out)" >&2
  exit 1
fi
echo "run-fuzzers: ${names[*]}: no findings in $seconds s each"
