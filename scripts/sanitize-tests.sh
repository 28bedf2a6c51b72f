#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the user-space code
# (the BPF programs are built as always and need none), then the tests that
# exercise it. Part of .ci/run (after scripts/run-tests.sh).
#
#   scripts/sanitize-tests.sh [ctest -R regex]
#
# The tests are chosen, not all of them (the full suite under ASan would more
# than double CI time for little): everything that parses outside input or
# runs the daemon's own threads and state, i.e.
#   - the daemon's parts (sessions, session store, scheduler, stop strings,
#     config, verify slots) and the sampler;
#   - model directory, safetensors and config parsing, the model generator;
#   - the tokenizer, its oracle comparison on the 1 MB corpus and the chat template;
#   - the float reference on the generated models (the daemon's reference backend);
#   - the verify parsers (policy scanner, fixtures, dependency lists, calls,
#     verifier log, source extraction);
#   - the client: its unit tests, its offline and daemon tests;
#   - the daemon end to end: the integration test and the fault test
#     (kill -9, killed clients, 16 streams), with the sanitized daemon.
# Left out: the BPF operator, engine and accuracy tests (their work is in the
# kernel; the integration and fault tests drive the engine's user-space code),
# the verify sandbox and corpus tests (clang's work, in a sandbox) and systemd.
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
units+='|Tokenizer|StreamDecoder|PreTokenizer|SyntheticTokenizer|TokenizerOracle|ChatTemplate'
units+='|MinusculeModel|GeneratedModelReference|GeneratedModels/ReferenceBackendTest'
units+='|VerifyPolicy|VerifyFixtures|VerifyDependencyList|VerifyCalls|VerifyLog|VerifyGenerate|cli_unit'
regex=${1:-"^(${units})\\.|^(daemon_integration|daemon_fault|cli_offline|cli_daemon|tokenizer_oracle_generate|make_test_models)\$"}
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
targets=(qwen3-bpfd qwen3-bpf qwen3-bpf-mkmodel daemon_parts_test sampler_test model_tests tokenizer_unit_tests
         tokenizer_oracle_tests reference_tests verify_pipeline_test cli_unit_test)
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
