#!/usr/bin/env bash
# The test command: installs what the tests need, builds, generates the test
# models (a ctest fixture) and runs every test. Run as root (the tests load
# BPF programs). Extra arguments go to ctest, e.g. -R engine.
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${QWEN3_BUILD_DIR:-$root_dir/build}
if [[ $(id -u) -ne 0 ]]; then
  echo "run-tests: run as root (the tests load BPF programs)" >&2
  exit 2
fi
"$root_dir/scripts/setup-deps.sh"
"$root_dir/scripts/build.sh"
rm -f "$build_dir/tests/fault/fault-report.txt"
rc=0
ctest --test-dir "$build_dir" --output-on-failure --timeout 1200 "$@" || rc=$?
# ctest shows a passing test's output only with -V: the fault test's report.
if [[ -f $build_dir/tests/fault/fault-report.txt ]]; then cat "$build_dir/tests/fault/fault-report.txt"; fi
exit $rc
