#!/usr/bin/env bash
# Configures and builds the project into ./build (or $QWEN3_BUILD_DIR).
#   scripts/build.sh                  everything: daemon, CLI, tools, tests, test models (run-tests.sh)
#   scripts/build.sh installed        only what `cmake --install` installs (quickstart.sh)
# QWEN3_BUILD_TESTING=OFF configures without the tests (CMake's BUILD_TESTING).
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${QWEN3_BUILD_DIR:-$root_dir/build}
build_type=${QWEN3_BUILD_TYPE:-RelWithDebInfo}
cmake -S "$root_dir" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
  -DCMAKE_INSTALL_PREFIX="${QWEN3_PREFIX:-/usr/local}" -DBUILD_TESTING="${QWEN3_BUILD_TESTING:-ON}" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j"$(nproc)" "${targets[@]}"
