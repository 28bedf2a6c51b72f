// Where the tokenizer tests find their inputs: environment variables set by
// tests/tokenizer/CMakeLists.txt. Missing inputs fail the test (never skip):
// CI installs them with scripts/setup-deps.sh.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace qwen3::test {

inline std::string required_env(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) {
    ADD_FAILURE() << name << " is not set; run the test through ctest (tests/tokenizer/CMakeLists.txt sets it)";
    return {};
  }
  return value;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Output of oracle/make_oracle.js (ctest fixture tokenizer_oracle).
inline std::string oracle_dir() { return required_env("QWEN3_TOKENIZER_ORACLE_DIR"); }

// The real Qwen3 tokenizer files (third_party/qwen3-tokenizer): from
// QWEN3_TEST_TOKENIZER_DIR, or for the oracle tests (one environment variable
// per test, a ctest limitation) the directory the oracle itself read.
inline std::string tokenizer_dir() {
  if (const char* dir = std::getenv("QWEN3_TEST_TOKENIZER_DIR"); dir && *dir) return dir;
  if (std::getenv("QWEN3_TOKENIZER_ORACLE_DIR")) {
    const std::string summary = oracle_dir() + "/summary.json";
    std::string text = read_file(summary);
    auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("tokenizer_dir")) return j["tokenizer_dir"].get<std::string>();
    ADD_FAILURE() << summary << " is missing or has no tokenizer_dir: the fixture tokenizer_oracle_generate must run first";
    return {};
  }
  return required_env("QWEN3_TEST_TOKENIZER_DIR");
}

// One Tokenizer per test process (loading tokenizer.json takes ~1 s).
inline std::shared_ptr<const Tokenizer> qwen3_tokenizer() {
  static std::shared_ptr<const Tokenizer> tok = [] {
    std::string dir = tokenizer_dir();
    if (!std::filesystem::exists(dir + "/tokenizer.json")) {
      ADD_FAILURE() << dir << "/tokenizer.json is missing; run scripts/setup-deps.sh";
      return std::shared_ptr<const Tokenizer>();
    }
    return Tokenizer::load(dir);
  }();
  return tok;
}

}  // namespace qwen3::test
