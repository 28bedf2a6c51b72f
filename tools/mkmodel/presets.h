// The model shapes used across the tree: mkmodel's presets (tiny, small, 0.6b, 1.7b)
// and the Qwen3-0.6B shape the tests and benches check the BPF programs at. One
// place, so a test's "0.6B" is the model's 0.6B.
#pragma once

#include <string>

#include "model/model_config.h"

namespace qwen3::mkmodel {

// The architecture numbers of a preset; throws qwen3::Error for an unknown name.
ModelConfig preset_config(const std::string& preset);

// A shape for tests and benches: the architecture numbers given, RMSNorm eps
// 1e-6, RoPE theta 1e6, tied embeddings (what the presets use too).
ModelConfig model_shape(int hidden_size, int layers, int heads, int kv_heads, int head_dim, int intermediate_size,
                        int vocab_size);

// Qwen3-0.6B: 28 layers, hidden 1024, 16 query heads and 8 kv heads of 128,
// intermediate 3072, vocabulary 151936, tied embeddings (preset "0.6b").
ModelConfig qwen3_06b_shape();

}  // namespace qwen3::mkmodel
