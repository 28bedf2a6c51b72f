// Writes a minuscule Qwen3 directory (hidden 4, 1 layer, 2 heads, 1 KV head,
// head_dim 2, intermediate 4, vocab 8) with F32 weights chosen by the test.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_dir.h"
#include "model/safetensors_writer.h"
#include "model/tensor_layout.h"

namespace qwen3::test {

inline ModelConfig minuscule_config() {
  ModelConfig c;
  c.hidden_size = 4;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 2;
  c.intermediate_size = 4;
  c.vocab_size = 8;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = false;
  return c;
}

// `values(name, count)` gives each tensor's row-major values.
inline void write_minuscule_model(const std::filesystem::path& dir,
                                  const std::function<std::vector<float>(const std::string&, size_t)>& values) {
  const ModelConfig c = minuscule_config();
  std::filesystem::create_directories(dir);
  nlohmann::json cfg = {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"},
                        {"hidden_size", c.hidden_size}, {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"num_key_value_heads", c.num_key_value_heads}, {"head_dim", c.head_dim},
                        {"intermediate_size", c.intermediate_size}, {"vocab_size", c.vocab_size},
                        {"rms_norm_eps", c.rms_norm_eps}, {"rope_theta", c.rope_theta},
                        {"max_position_embeddings", c.max_position_embeddings},
                        {"tie_word_embeddings", false}, {"eos_token_id", 7}};
  std::ofstream(dir / "config.json") << cfg.dump(2);
  auto layout = qwen3_tensor_layout(c, true);
  std::vector<TensorDecl> decls;
  for (const auto& s : layout) decls.push_back({s.name, DType::f32, s.shape});
  SafetensorsWriter w((dir / "model.safetensors").string(), decls);
  for (const auto& s : layout) {
    size_t n = 1;
    for (int64_t d : s.shape) n *= static_cast<size_t>(d);
    std::vector<float> v = values(s.name, n);
    v.resize(n, 0.0f);
    w.write(v.data(), n * 4);
  }
  w.finish();
}

// Seeded values in [-1, 1]; norm weights in [0.5, 1.5].
inline std::vector<float> random_values(const std::string& name, size_t n, uint32_t seed) {
  std::mt19937 rng(seed + static_cast<uint32_t>(std::hash<std::string>()(name)));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  const bool norm = name.find("norm") != std::string::npos;
  for (auto& x : v) x = norm ? 1.0f + 0.5f * u(rng) : u(rng);
  return v;
}

}  // namespace qwen3::test
