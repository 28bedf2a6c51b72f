#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the user-space code
# (the BPF programs are built as always and need none), then its unit tests and
# the daemon integration test against the sanitized daemon. Opt-in: a second
# full build (~15 min on 2 cores), so it is not part of scripts/run-tests.sh.
#
#   scripts/sanitize-tests.sh [ctest -R regex]
#
# Builds into ${QWEN3_ASAN_BUILD_DIR:-build-asan}. Any sanitizer report fails
# the test it occurs in (halt_on_error, no recovery from UB).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${QWEN3_ASAN_BUILD_DIR:-$root/build-asan}
regex=${1:-'^(daemon_integration|make_test_models)$|^(ReusablePrefix|StopMatcher|SessionManager|SessionStore|Scheduler|VerifySlots|Config|Sampler|DtypeTest|ModelDirTest|DamagedModel|ShardedModel|MkModelTest|SafetensorsFuzz|Tokenizer|StreamDecoder|PreTokenizer|SyntheticTokenizer|MinusculeModel|GeneratedModelReference|WeightFormats|GeneratedModels/ReferenceBackendTest)\.'}
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
nice -n 5 cmake --build "$build" -j"$(nproc)" --target \
  qwen3-bpfd qwen3-bpf-mkmodel daemon_parts_test sampler_test model_tests tokenizer_unit_tests reference_tests
# Leaks are reported too; gRPC's and protobuf's process-lifetime singletons are not ours.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/lsan.supp}
ctest --test-dir "$build" --output-on-failure --timeout 1800 -R "$regex"
