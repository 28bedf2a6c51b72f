// The generated test models (ctest fixture test_models, QWEN3_TEST_MODELS_DIR)
// and one loaded BPF backend per configuration, kept for the whole test
// binary: loading converts every weight and verifies the programs.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include <random>
#include <vector>

#include "engine/bpf_backend.h"
#include "model/model_dir.h"
#include "reference/reference_backend.h"

namespace qwen3::test_support {

inline std::string models_dir() {
  const char* d = std::getenv("QWEN3_TEST_MODELS_DIR");
  return d ? d : "test-models";
}

inline std::shared_ptr<const ModelDir> open_model(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const ModelDir>> cache;
  auto& m = cache[name];
  if (!m) m = ModelDir::open(models_dir() + "/" + name);
  return m;
}

// Two worker threads, as on the target machine.
inline Backend& bpf_backend(const std::string& model, WeightPath path, Precision prec, int kv_bits, int max_context) {
  static std::map<std::string, std::unique_ptr<Backend>> cache;
  const std::string key = model + "/" + weight_path_name(path) + "/" + precision_name(prec) + "/kv" +
                          std::to_string(kv_bits) + "/ctx" + std::to_string(max_context);
  auto& b = cache[key];
  if (!b) {
    BpfEngineOptions o;
    o.weight_path = path;
    o.precision = prec;
    o.kv_bits = kv_bits;
    o.threads = 2;
    o.max_context = max_context;
    b = make_bpf_backend(open_model(model), o);
  }
  return *b;
}

// The float reference of a model, two threads, kept for the whole test binary.
inline Backend& reference_backend(const std::string& model) {
  static std::map<std::string, std::unique_ptr<Backend>> cache;
  auto& b = cache[model];
  if (!b) b = make_reference_backend(open_model(model), 2);
  return *b;
}

// A prompt of the random-model tests: mostly ids from the first 20k (where a
// tokenizer's common tokens live), some from anywhere.
inline std::vector<int32_t> random_prompt(std::mt19937_64& rng, int n, int vocab) {
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % 8 == 0 ? rng() % vocab : rng() % 20000);
  return ids;
}

}  // namespace qwen3::test_support
