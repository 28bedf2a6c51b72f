// The tensors a dense Qwen3 checkpoint holds, with their shapes, derived from
// the config. The loader checks files against it; the generator writes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace qwen3 {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// In checkpoint order: embed, layers 0..L-1, final norm, then lm_head when
// `with_lm_head`.
std::vector<TensorSpec> qwen3_tensor_layout(const ModelConfig& config, bool with_lm_head);

std::string layer_tensor_name(int layer, const std::string& suffix);

}  // namespace qwen3
