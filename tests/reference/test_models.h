// Where the reference tests find the generated models (fixture test_models).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace qwen3::test {

inline std::string generated_model(const std::string& name) {
  if (const char* v = std::getenv("QWEN3_TEST_MODELS_DIR"); v && *v) return std::string(v) + "/" + name;
  return std::string(QWEN3_TEST_MODELS_DIR_DEFAULT) + "/" + name;
}

}  // namespace qwen3::test
