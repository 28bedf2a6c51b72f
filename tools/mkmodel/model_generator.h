// Generates a Hugging Face–layout Qwen3 directory with seeded random BF16
// weights, scaled like a real checkpoint (see docs/model-format.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "presets.h"

namespace qwen3::mkmodel {

struct GeneratorOptions {
  std::string preset = "tiny";  // tiny | small | 0.6b | 1.7b
  uint64_t seed = 1;
  bool outliers = false;        // plant "massive activation" residual channels
  bool untied = false;          // write a separate lm_head.weight
  std::string tokenizer_dir;    // where tokenizer.json and tokenizer_config.json come from
  int threads = 2;
};

// Residual channels that --outliers makes large, for a hidden size.
std::vector<int> outlier_channels(int hidden_size);

// Writes config.json last, so a directory with config.json is complete.
void generate_model(const std::string& out_dir, const GeneratorOptions& options);

}  // namespace qwen3::mkmodel
