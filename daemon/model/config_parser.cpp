#include "model/config_parser.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/mapped_file.h"

namespace qwen3 {
namespace {

using nlohmann::json;

Error bad(const std::string& path, const std::string& key, const std::string& what) {
  return invalid_argument(path + ": key '" + key + "': " + what);
}

json parse_object(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw invalid_argument(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw invalid_argument(path + ": expected a JSON object at the top level");
  return j;
}

// An integer key in [lo, hi]; `fallback` when absent or null (nullopt = required).
int64_t read_int(const json& j, const std::string& path, const std::string& key, int64_t lo, int64_t hi,
                 std::optional<int64_t> fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (!fallback) throw bad(path, key, "required but missing");
    return *fallback;
  }
  if (!it->is_number_integer()) throw bad(path, key, "must be an integer, got " + it->dump());
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    throw bad(path, key, "value " + std::to_string(v) + " out of range [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "]");
  return v;
}

double read_number(const json& j, const std::string& path, const std::string& key, double lo, double hi,
                   double fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) throw bad(path, key, "must be a number, got " + it->dump());
  double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    throw bad(path, key, "value " + it->dump() + " out of range [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "]");
  return v;
}

bool read_bool(const json& j, const std::string& path, const std::string& key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw bad(path, key, "must be true or false, got " + it->dump());
  return it->get<bool>();
}

// Token ids given as an int, a list of ints, or null.
std::vector<int32_t> read_ids(const json& j, const std::string& path, const std::string& key, int vocab) {
  std::vector<int32_t> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  auto take = [&](const json& v) {
    if (!v.is_number_integer()) throw bad(path, key, "token ids must be integers, got " + v.dump());
    int64_t id = v.get<int64_t>();
    if (id < 0 || id >= vocab)
      throw bad(path, key, "token id " + std::to_string(id) + " outside the vocabulary [0, " +
                               std::to_string(vocab) + ")");
    out.push_back(static_cast<int32_t>(id));
  };
  if (it->is_array()) {
    for (const auto& v : *it) take(v);
  } else {
    take(*it);
  }
  return out;
}

void add_unique(std::vector<int32_t>& to, const std::vector<int32_t>& from) {
  for (int32_t id : from)
    if (std::find(to.begin(), to.end(), id) == to.end()) to.push_back(id);
}

}  // namespace

ModelConfig parse_model_config(const std::string& text, const std::string& path) {
  json j = parse_object(text, path);

  // Identity: a dense Qwen3 causal LM, nothing else (qwen2, qwen3_moe, ...).
  bool arch_ok = false;
  if (auto it = j.find("architectures"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) throw bad(path, "architectures", "must be a list of strings");
    for (const auto& a : *it) {
      if (!a.is_string()) throw bad(path, "architectures", "must be a list of strings");
      if (a.get<std::string>() == "Qwen3ForCausalLM") arch_ok = true;
    }
    if (!arch_ok)
      throw bad(path, "architectures", it->dump() + " does not name Qwen3ForCausalLM; only dense Qwen3 models are supported");
  }
  ModelConfig c;
  if (auto it = j.find("model_type"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>() != "qwen3")
      throw bad(path, "model_type", it->dump() + " is not \"qwen3\"; only dense Qwen3 models are supported");
    c.model_type = "qwen3";
  } else if (!arch_ok) {
    throw invalid_argument(path + ": neither 'model_type': \"qwen3\" nor 'architectures' with Qwen3ForCausalLM; not a Qwen3 config");
  }

  // Features of the Qwen3 family this implementation does not have.
  if (read_bool(j, path, "attention_bias", false))
    throw bad(path, "attention_bias", "true is not supported (Qwen3 has no attention bias)");
  if (read_bool(j, path, "use_sliding_window", false))
    throw bad(path, "use_sliding_window", "true is not supported");
  if (auto it = j.find("rope_scaling"); it != j.end() && !it->is_null())
    throw bad(path, "rope_scaling", "RoPE scaling " + it->dump() + " is not supported");
  if (auto it = j.find("hidden_act"); it != j.end() && !it->is_null() && *it != "silu")
    throw bad(path, "hidden_act", it->dump() + " is not supported (Qwen3 uses \"silu\")");

  constexpr int64_t kMaxDim = 1 << 17;
  c.hidden_size = static_cast<int>(read_int(j, path, "hidden_size", 1, kMaxDim, std::nullopt));
  c.num_hidden_layers = static_cast<int>(read_int(j, path, "num_hidden_layers", 1, 1024, std::nullopt));
  c.num_attention_heads = static_cast<int>(read_int(j, path, "num_attention_heads", 1, 4096, std::nullopt));
  c.num_key_value_heads =
      static_cast<int>(read_int(j, path, "num_key_value_heads", 1, 4096, c.num_attention_heads));
  c.intermediate_size = static_cast<int>(read_int(j, path, "intermediate_size", 1, 1 << 20, std::nullopt));
  c.vocab_size = static_cast<int>(read_int(j, path, "vocab_size", 1, 1 << 24, std::nullopt));

  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    c.head_dim = static_cast<int>(read_int(j, path, "head_dim", 1, 4096, std::nullopt));
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      throw bad(path, "head_dim", "absent, and hidden_size " + std::to_string(c.hidden_size) +
                                      " is not divisible by num_attention_heads " +
                                      std::to_string(c.num_attention_heads));
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0)
    throw bad(path, "head_dim", std::to_string(c.head_dim) + " must be even for rotary embeddings");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw bad(path, "num_key_value_heads", std::to_string(c.num_key_value_heads) +
                                               " does not divide num_attention_heads " +
                                               std::to_string(c.num_attention_heads));
  if (static_cast<int64_t>(c.num_attention_heads) * c.head_dim > kMaxDim)
    throw bad(path, "num_attention_heads", "num_attention_heads * head_dim exceeds " + std::to_string(kMaxDim));

  c.rms_norm_eps = read_number(j, path, "rms_norm_eps", 1e-12, 1.0, 1e-6);
  if (c.rms_norm_eps <= 0) throw bad(path, "rms_norm_eps", "must be positive");
  c.rope_theta = read_number(j, path, "rope_theta", 1.0, 1e12, 10000.0);
  c.max_position_embeddings =
      static_cast<int>(read_int(j, path, "max_position_embeddings", 1, 1 << 24, 32768));
  c.tie_word_embeddings = read_bool(j, path, "tie_word_embeddings", false);

  auto bos = read_ids(j, path, "bos_token_id", c.vocab_size);
  if (bos.size() > 1) throw bad(path, "bos_token_id", "must be a single id");
  c.bos_token_id = bos.empty() ? -1 : bos[0];
  c.eos_token_ids = read_ids(j, path, "eos_token_id", c.vocab_size);

  if (auto it = j.find("torch_dtype"); it != j.end() && it->is_string()) c.torch_dtype = it->get<std::string>();
  return c;
}

void merge_generation_config(ModelConfig& c, const std::string& text, const std::string& path) {
  json j = parse_object(text, path);
  add_unique(c.eos_token_ids, read_ids(j, path, "eos_token_id", c.vocab_size));
  if (c.bos_token_id < 0) {
    auto bos = read_ids(j, path, "bos_token_id", c.vocab_size);
    if (!bos.empty()) c.bos_token_id = bos[0];
  }
  c.default_temperature = read_number(j, path, "temperature", 0.0, 100.0, 0.0);
  c.default_top_k = static_cast<int>(read_int(j, path, "top_k", 0, c.vocab_size, 0));
  c.default_top_p = read_number(j, path, "top_p", 0.0, 1.0, 0.0);
  // The sampler keeps min_p below 1 (a cut at the best token's probability
  // would keep nothing but it) and a penalty of 0 would divide by zero.
  c.default_min_p = read_number(j, path, "min_p", 0.0, 0.99, 0.0);
  c.default_repetition_penalty = read_number(j, path, "repetition_penalty", 0.0, 100.0, 0.0);
  if (c.default_repetition_penalty > 0 && c.default_repetition_penalty < 1e-3)
    throw bad(path, "repetition_penalty", "must be 0 (none) or at least 0.001");
  c.default_do_sample = read_bool(j, path, "do_sample", true);
}

ModelConfig load_model_config(const std::string& dir) {
  namespace fs = std::filesystem;
  std::string config_path = (fs::path(dir) / "config.json").string();
  ModelConfig c = parse_model_config(read_text_file(config_path), config_path);
  std::string gen_path = (fs::path(dir) / "generation_config.json").string();
  std::error_code ec;
  if (fs::exists(gen_path, ec)) merge_generation_config(c, read_text_file(gen_path), gen_path);
  return c;
}

}  // namespace qwen3
