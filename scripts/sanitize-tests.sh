#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the user-space code
# (the BPF programs are built as always and need none), then the tests that
# exercise it. Part of .ci/run (after scripts/run-tests.sh).
#
#   scripts/sanitize-tests.sh [ctest -R regex]
#
# The tests are chosen, not all of them (the full suite under ASan would more
# than double CI time for little): those of the code that parses outside input
# or runs the daemon's own threads and state, i.e.
#   - the daemon's parts (sessions, session store, scheduler, stop strings,
#     config, verify slots) and the sampler;
#   - model directory, safetensors and config parsing, the model generator;
#   - the tokenizer's unit tests;
#   - the float reference on the generated models (the reference backend);
#   - the daemon end to end: daemon_integration, daemon_access, daemon_crash and
#     daemon_command_line against the sanitized daemon
#     (which drives the engine's user-space code, sessions, restore and access).
# Left out: the BPF operator, engine and accuracy tests (their work is in the
# kernel), the verify sandbox and corpus tests (clang's work, in a sandbox),
# systemd, and, not yet measured under ASan, the client tests, the tokenizer
# oracle and the fault test (its RSS bound means nothing with ASan's
# quarantine holding freed memory).
#
# Builds into ${QWEN3_ASAN_BUILD_DIR:-build-asan}. The test models are those of
# the main build (${QWEN3_BUILD_DIR:-build}, made by its ctest run) when they
# exist, so that the generator's float work is not repeated sanitized. Any
# sanitizer report fails the test it occurs in (no recovery).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${QWEN3_ASAN_BUILD_DIR:-$root/build-asan}
main_build=${QWEN3_BUILD_DIR:-$root/build}
units='ReusablePrefix|StopMatcher|SessionManager|SessionStore|Scheduler|VerifySlots|Config|Sampler'
units+='|DtypeTest|ModelDirTest|DamagedModel|ShardedModel|MkModelTest|SafetensorsFuzz|WeightFormats'
units+='|Tokenizer|StreamDecoder|PreTokenizer|SyntheticTokenizer'
units+='|MinusculeModel|GeneratedModelReference|GeneratedModels/ReferenceBackendTest'
# (make_test_models is not named: ctest adds it as the fixture's setup when it must run, and -FS
# below skips it when the main build's models are reused; named, it ran anyway and needed
# qwen3-bpf-quant-study, which this build does not make then.)
regex=${1:-"^(${units})\\.|^daemon_(integration|access|crash|command_line)\$"}
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
targets=(qwen3-bpfd qwen3-bpf-mkmodel session_manager_test scheduler_test service_parts_test sampler_test model_tests tokenizer_unit_tests reference_tests)
fixture=()
if [[ -f $main_build/test-models/tiny/config.json && $main_build != "$build" ]]; then
  rm -rf "$build/test-models"
  ln -s "$main_build/test-models" "$build/test-models"
  fixture=(-FS test_models)  # made already: do not remake them here
else
  targets+=(qwen3-bpf-quant-study)
fi
nice -n 5 cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
# Leaks are reported too; gRPC's and protobuf's process-lifetime singletons are not ours.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/lsan.supp}
rm -f "$build/tests/fault/fault-report.txt"
rc=0
ctest --test-dir "$build" --output-on-failure --timeout 1800 "${fixture[@]}" -R "$regex" || rc=$?
if [[ -f $build/tests/fault/fault-report.txt ]]; then cat "$build/tests/fault/fault-report.txt"; fi
exit $rc
