#include "presets.h"

#include "common/error.h"

namespace qwen3::mkmodel {

ModelConfig preset_config(const std::string& preset) {
  ModelConfig c;
  c.vocab_size = 151936;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.max_position_embeddings = 40960;
  c.tie_word_embeddings = true;
  c.bos_token_id = 151643;
  c.eos_token_ids = {151645, 151643};
  c.torch_dtype = "bfloat16";
  if (preset == "tiny") {
    c.hidden_size = 64; c.num_hidden_layers = 2; c.num_attention_heads = 4; c.num_key_value_heads = 2;
    c.head_dim = 32; c.intermediate_size = 192;
  } else if (preset == "small") {
    c.hidden_size = 256; c.num_hidden_layers = 4; c.num_attention_heads = 8; c.num_key_value_heads = 4;
    c.head_dim = 64; c.intermediate_size = 768;
  } else if (preset == "0.6b") {
    c.hidden_size = 1024; c.num_hidden_layers = 28; c.num_attention_heads = 16; c.num_key_value_heads = 8;
    c.head_dim = 128; c.intermediate_size = 3072;
  } else if (preset == "1.7b") {
    c.hidden_size = 2048; c.num_hidden_layers = 28; c.num_attention_heads = 16; c.num_key_value_heads = 8;
    c.head_dim = 128; c.intermediate_size = 6144;
  } else {
    throw invalid_argument("unknown preset '" + preset + "' (use tiny, small, 0.6b or 1.7b)");
  }
  return c;
}

ModelConfig model_shape(int hidden_size, int layers, int heads, int kv_heads, int head_dim, int intermediate_size,
                        int vocab_size) {
  ModelConfig c;
  c.hidden_size = hidden_size;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = head_dim;
  c.intermediate_size = intermediate_size;
  c.vocab_size = vocab_size;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.tie_word_embeddings = true;
  return c;
}

ModelConfig qwen3_06b_shape() { return preset_config("0.6b"); }

}  // namespace qwen3::mkmodel
