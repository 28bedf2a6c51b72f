#include "model/tensor_layout.h"

namespace qwen3 {

std::string layer_tensor_name(int layer, const std::string& suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

std::vector<TensorSpec> qwen3_tensor_layout(const ModelConfig& c, bool with_lm_head) {
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), d = c.head_dim, m = c.intermediate_size,
                v = c.vocab_size;
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {v, h}});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    auto add = [&](const std::string& suffix, std::vector<int64_t> shape) {
      out.push_back({layer_tensor_name(l, suffix), std::move(shape)});
    };
    add("input_layernorm.weight", {h});
    add("self_attn.q_proj.weight", {q, h});
    add("self_attn.k_proj.weight", {kv, h});
    add("self_attn.v_proj.weight", {kv, h});
    add("self_attn.q_norm.weight", {d});
    add("self_attn.k_norm.weight", {d});
    add("self_attn.o_proj.weight", {h, q});
    add("post_attention_layernorm.weight", {h});
    add("mlp.gate_proj.weight", {m, h});
    add("mlp.up_proj.weight", {m, h});
    add("mlp.down_proj.weight", {h, m});
  }
  out.push_back({"model.norm.weight", {h}});
  if (with_lm_head) out.push_back({"lm_head.weight", {v, h}});
  return out;
}

}  // namespace qwen3
