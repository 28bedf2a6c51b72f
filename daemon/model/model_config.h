// The architecture numbers of a dense Qwen3 model, as read from config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qwen3 {

struct ModelConfig {
  std::string model_type = "qwen3";
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;
  int intermediate_size = 0;
  int vocab_size = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 1000000.0;
  int max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  int32_t bos_token_id = -1;               // -1 when absent
  std::vector<int32_t> eos_token_ids;      // config.json and generation_config.json merged

  // generation_config.json defaults (when present); 0 / empty means "not given".
  double default_temperature = 0.0;
  int default_top_k = 0;
  double default_top_p = 0.0;
  double default_min_p = 0.0;
  double default_repetition_penalty = 0.0;
  bool default_do_sample = true;           // false: the default is greedy (transformers' do_sample)

  // Informational: the checkpoint's declared storage type ("bfloat16", ...).
  std::string torch_dtype;

  int q_dim() const { return num_attention_heads * head_dim; }
  int kv_dim() const { return num_key_value_heads * head_dim; }
  int group_size() const { return num_attention_heads / num_key_value_heads; }
};

}  // namespace qwen3
