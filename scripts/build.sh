#!/usr/bin/env bash
# Configures and builds the project into ./build (or $QWEN3_BUILD_DIR).
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${QWEN3_BUILD_DIR:-$root_dir/build}
build_type=${QWEN3_BUILD_TYPE:-RelWithDebInfo}
cmake -S "$root_dir" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
  -DCMAKE_INSTALL_PREFIX="${QWEN3_PREFIX:-/usr/local}" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
