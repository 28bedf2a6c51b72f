// Shared by the libFuzzer harnesses (tests/fuzz/run-fuzzers.sh builds them
// with clang-19 -fsanitize=fuzzer,address,undefined). A harness may throw
// qwen3::Error (or another std::exception) for bad input: that is the
// parsers' contract. Crashes, sanitizer reports, hangs and anything else
// thrown are findings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#define QWEN3_FUZZ_INPUT(data, size) std::string input(reinterpret_cast<const char*>(data), size)

// Runs `body`; a std::exception is the expected rejection of bad input.
template <typename F>
int fuzz_expecting_rejections(F&& body) {
  try {
    body();
  } catch (const std::exception&) {
  }
  return 0;
}
