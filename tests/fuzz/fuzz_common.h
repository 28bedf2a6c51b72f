// Shared by the libFuzzer harnesses (tests/fuzz/run-fuzzers.sh builds them
// with clang-19 -fsanitize=fuzzer,address,undefined). A harness may throw
// qwen3::Error (or another std::exception) for bad input: that is the
// parsers' contract. Crashes, sanitizer reports, hangs and anything else
// thrown are findings.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

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

// The input as a file (an in-memory one, reused): its path for parsers that read files.
inline std::string as_file(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("fuzz-input", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0) return "";
  if (size > 0 && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return "";
  return "/proc/self/fd/" + std::to_string(fd);
}

// The real Qwen3 tokenizer, from QWEN3_FUZZ_TOKENIZER_DIR (the script passes
// third_party/qwen3-tokenizer), loaded once.
inline std::shared_ptr<const qwen3::Tokenizer> fuzz_tokenizer() {
  static const auto tok = [] {
    const char* dir = std::getenv("QWEN3_FUZZ_TOKENIZER_DIR");
    return qwen3::Tokenizer::load(dir ? dir : "third_party/qwen3-tokenizer");
  }();
  return tok;
}
