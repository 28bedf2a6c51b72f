#include "model_generator.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/dtype.h"
#include "model/safetensors_writer.h"
#include "model/tensor_layout.h"
#include "calibrator.h"

namespace qwen3::mkmodel {
namespace fs = std::filesystem;

namespace {

// splitmix64: seeds one independent stream per (tensor, chunk), so the output
// does not depend on how chunks are spread over threads.
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct Rng {  // xoshiro256+
  uint64_t s[4];
  explicit Rng(uint64_t seed) {
    for (auto& v : s) v = splitmix(seed);
  }
  uint64_t next() {
    uint64_t r = s[0] + s[3], t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return r;
  }
  // Uniform in [-1, 1).
  float symmetric() { return static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f; }
  float unit() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
};

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Uniform distribution with standard deviation `std`.
constexpr float kUniformToStd = 1.7320508f;  // sqrt(3)

// How one tensor's values are drawn: fill(out, first_row, rng) fills whole rows.
struct Recipe {
  std::string name;
  std::vector<int64_t> shape;
  std::function<void(float* out, int64_t first_row, int64_t rows, int64_t cols, Rng& rng)> fill;
};

struct Scales {
  float embed_std;       // embedding (and lm_head) entries
  float sublayer_out;    // rms each attention block adds to the residual
  // rms each MLP block adds, relative to attention. SwiGLU is roughly quadratic
  // in its input's scale; with outliers RMSNorm no longer rescales the other
  // channels, and a full-size MLP lets a few unlucky tokens grow without bound
  // over 28 layers. At 0.4 the 0.6b --outliers model stays O(10) everywhere.
  float mlp_share = 0.4f;
  float act_rms = 0.6f;  // rms of silu(gate)*up for unit-rms gate and up
};

}  // namespace

std::vector<int> outlier_channels(int h) {
  std::vector<int> ch = {h * 3 / 16 + 1, h * 9 / 16 + 3};
  if (h >= 128) ch.push_back(h * 13 / 16 + 2);
  return ch;
}

namespace {

OutlierPlan make_outlier_plan(const ModelConfig& c, bool outliers) {
  OutlierPlan plan;
  if (!outliers) return plan;
  plan.channels = outlier_channels(c.hidden_size);
  const float base[] = {120.0f, -180.0f, 150.0f};
  const float layer0[] = {300.0f, -400.0f, 250.0f};
  const float layer1[] = {500.0f, -600.0f, 450.0f};
  for (size_t k = 0; k < plan.channels.size(); ++k) plan.embed_value.push_back(base[k % 3]);
  for (int l = 0; l < std::min(2, c.num_hidden_layers); ++l) {
    plan.added.emplace_back();
    for (size_t k = 0; k < plan.channels.size(); ++k) plan.added[l].push_back((l == 0 ? layer0 : layer1)[k % 3]);
  }
  return plan;
}

// Base random values; the Calibrator then sizes the norms and outlier neurons.
std::vector<Recipe> make_recipes(const ModelConfig& c, const GeneratorOptions& opt, const OutlierPlan& plan) {
  const int H = c.hidden_size, M = c.intermediate_size, Q = c.q_dim();
  Scales sc{4.0f / std::sqrt(static_cast<float>(H)), 1.0f};

  auto matrix = [](float std) {
    return [a = std * kUniformToStd](float* out, int64_t, int64_t rows, int64_t cols, Rng& rng) {
      for (int64_t i = 0; i < rows * cols; ++i) out[i] = a * rng.symmetric();
    };
  };
  auto norm = [plan](float* out, int64_t, int64_t rows, int64_t cols, Rng& rng) {
    for (int64_t i = 0; i < rows * cols; ++i) {
      float u = rng.unit();
      out[i] = plan.is_outlier(i) ? plan.norm_weight : 0.5f + u;
    }
  };
  auto head_norm = [](float* out, int64_t, int64_t rows, int64_t cols, Rng& rng) {
    for (int64_t i = 0; i < rows * cols; ++i) out[i] = 1.5f + 2.0f * rng.unit();
  };

  std::vector<Recipe> out;
  for (const TensorSpec& spec : qwen3_tensor_layout(c, opt.untied)) {
    Recipe r{spec.name, spec.shape, {}};
    const std::string& n = spec.name;
    auto ends = [&](const char* s) { return n.size() >= strlen(s) && n.compare(n.size() - strlen(s), strlen(s), s) == 0; };
    if (n == "model.embed_tokens.weight") {
      r.fill = [a = sc.embed_std * kUniformToStd, plan](float* out, int64_t, int64_t rows, int64_t cols, Rng& rng) {
        for (int64_t i = 0; i < rows * cols; ++i) out[i] = a * rng.symmetric();
        for (size_t k = 0; k < plan.channels.size(); ++k)
          for (int64_t row = 0; row < rows; ++row) out[row * cols + plan.channels[k]] = plan.embed_value[k];
      };
    } else if (n == "lm_head.weight") {
      r.fill = matrix(sc.embed_std);
    } else if (ends("layernorm.weight") || n == "model.norm.weight") {
      r.fill = norm;
    } else if (ends("q_norm.weight") || ends("k_norm.weight")) {
      r.fill = head_norm;
    } else if (ends("q_proj.weight") || ends("k_proj.weight") || ends("v_proj.weight") || ends("gate_proj.weight") ||
               ends("up_proj.weight")) {
      r.fill = matrix(1.0f / std::sqrt(static_cast<float>(H)));  // unit-rms outputs from unit-rms inputs
    } else if (ends("o_proj.weight")) {
      r.fill = matrix(sc.sublayer_out / std::sqrt(static_cast<float>(Q)));
    } else if (ends("down_proj.weight")) {
      r.fill = matrix(sc.mlp_share * sc.sublayer_out / (sc.act_rms * std::sqrt(static_cast<float>(M))));
    } else {
      throw Error("mkmodel: no recipe for tensor " + n);
    }
    out.push_back(std::move(r));
  }
  return out;
}

// Streams all tensors into model.safetensors, generating row blocks on
// `threads` threads and writing them in order.
void write_weights(const std::string& path, const std::vector<Recipe>& recipes, uint64_t seed, int threads,
                   Calibrator& calibrator) {
  std::vector<TensorDecl> decls;
  for (const auto& r : recipes) decls.push_back({r.name, DType::bf16, r.shape});
  SafetensorsWriter writer(path, decls, {{"format", "pt"}, {"generator", "qwen3-bpf-mkmodel"}});

  constexpr int64_t kChunkElements = 1 << 21;
  threads = std::max(1, threads);
  std::vector<std::vector<float>> fbuf(threads);
  std::vector<std::vector<uint16_t>> hbuf(threads);
  for (const auto& r : recipes) {
    const int64_t rows = r.shape[0];
    const int64_t cols = r.shape.size() > 1 ? r.shape[1] : rows;
    const int64_t rows_eff = r.shape.size() > 1 ? rows : 1;  // a vector is one row
    const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkElements / cols);
    const uint64_t tensor_seed = seed * 0x9e3779b97f4a7c15ull ^ name_hash(r.name);
    for (int64_t row0 = 0; row0 < rows_eff; row0 += rows_per_chunk * threads) {
      auto work = [&](int t) {
        int64_t first = row0 + t * rows_per_chunk;
        int64_t n = std::min(rows_per_chunk, rows_eff - first);
        if (n <= 0) return;
        fbuf[t].resize(n * cols);
        hbuf[t].resize(n * cols);
        Rng rng(tensor_seed + static_cast<uint64_t>(first) * 0x2545f4914f6cdd1dull);
        r.fill(fbuf[t].data(), first, n, cols, rng);
      };
      auto convert = [&](int t) {
        int64_t first = row0 + t * rows_per_chunk;
        int64_t n = std::min(rows_per_chunk, rows_eff - first);
        for (int64_t i = 0; i < std::max<int64_t>(0, n) * cols; ++i) hbuf[t][i] = float_to_bf16(fbuf[t][i]);
      };
      std::vector<std::thread> pool;
      for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
      work(0);
      for (auto& th : pool) th.join();
      // Calibration runs in file order, so blocks are handed over one by one.
      for (int t = 0; t < threads; ++t) {
        int64_t first = row0 + t * rows_per_chunk;
        int64_t n = std::min(rows_per_chunk, rows_eff - first);
        if (n > 0) calibrator.process(r.name, r.shape, first, n, cols, fbuf[t].data());
      }
      pool.clear();
      for (int t = 1; t < threads; ++t) pool.emplace_back(convert, t);
      convert(0);
      for (auto& th : pool) th.join();
      for (int t = 0; t < threads; ++t) {
        int64_t first = row0 + t * rows_per_chunk;
        int64_t n = std::min(rows_per_chunk, rows_eff - first);
        if (n > 0) writer.write(hbuf[t].data(), n * cols * 2);
      }
    }
  }
  writer.finish();
}

void write_json(const std::string& path, const nlohmann::ordered_json& j) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out) throw Error(path + ": cannot write");
}

void copy_tokenizer(const std::string& from, const std::string& to) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::path src = fs::path(from) / name;
    std::error_code ec;
    if (!fs::is_regular_file(src, ec))
      throw not_found(src.string() +
                      ": tokenizer file not found; pass --tokenizer-dir DIR holding tokenizer.json and "
                      "tokenizer_config.json (scripts/setup-deps.sh fetches them into third_party/qwen3-tokenizer)");
    fs::copy_file(src, fs::path(to) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) throw Error((fs::path(to) / name).string() + ": cannot copy tokenizer file: " + ec.message());
  }
}

}  // namespace

void generate_model(const std::string& out_dir, const GeneratorOptions& opt) {
  ModelConfig c = preset_config(opt.preset);
  c.tie_word_embeddings = !opt.untied;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw Error(out_dir + ": cannot create directory: " + ec.message());
  fs::remove(fs::path(out_dir) / "config.json", ec);  // the completion marker goes last

  copy_tokenizer(opt.tokenizer_dir, out_dir);
  OutlierPlan plan = make_outlier_plan(c, opt.outliers);
  Calibrator calibrator(c, plan, opt.seed, opt.threads);
  write_weights((fs::path(out_dir) / "model.safetensors").string(), make_recipes(c, opt, plan), opt.seed, opt.threads,
                calibrator);

  nlohmann::ordered_json gen = {{"bos_token_id", c.bos_token_id}, {"do_sample", true},
                                {"eos_token_id", c.eos_token_ids}, {"pad_token_id", 151643},
                                {"temperature", 0.6},              {"top_k", 20},
                                {"top_p", 0.95},                   {"transformers_version", "4.51.0"}};
  write_json((fs::path(out_dir) / "generation_config.json").string(), gen);

  nlohmann::ordered_json cfg = {
      {"architectures", {"Qwen3ForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", c.bos_token_id},
      {"eos_token_id", c.eos_token_ids[0]},
      {"head_dim", c.head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", c.hidden_size},
      {"initializer_range", 0.02},
      {"intermediate_size", c.intermediate_size},
      {"max_position_embeddings", c.max_position_embeddings},
      {"max_window_layers", c.num_hidden_layers},
      {"model_type", "qwen3"},
      {"num_attention_heads", c.num_attention_heads},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_key_value_heads", c.num_key_value_heads},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_scaling", nullptr},
      {"rope_theta", c.rope_theta},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"torch_dtype", "bfloat16"},
      {"transformers_version", "4.51.0"},
      {"use_cache", true},
      {"use_sliding_window", false},
      {"vocab_size", c.vocab_size},
  };
  nlohmann::ordered_json origin = {{"preset", opt.preset}, {"seed", opt.seed}, {"outliers", opt.outliers}};
  if (opt.outliers) origin["outlier_channels"] = outlier_channels(c.hidden_size);
  cfg["qwen3_bpf_generated"] = origin;
  write_json((fs::path(out_dir) / "config.json").string(), cfg);
}

}  // namespace qwen3::mkmodel
