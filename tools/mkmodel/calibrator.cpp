#include "calibrator.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "common/error.h"
#include "model/dtype.h"
#include "reference/matmul.h"
#include "reference/ops.h"

namespace qwen3::mkmodel {

bool OutlierPlan::is_outlier(int64_t ch) const {
  return std::find(channels.begin(), channels.end(), ch) != channels.end();
}

Calibrator::Calibrator(const ModelConfig& config, OutlierPlan plan, uint64_t seed, int threads)
    : c_(config), plan_(std::move(plan)), pool_(threads), sequences_(2), seq_len_(12) {
  std::mt19937_64 rng(seed ^ 0xca11b4a7e5ull);
  std::uniform_int_distribution<int32_t> ids(0, std::min(151642, c_.vocab_size - 1));
  tokens_.resize(static_cast<size_t>(sequences_) * seq_len_);
  for (auto& t : tokens_) t = ids(rng);
  x_.assign(tokens_.size() * c_.hidden_size, 0.0f);
}

void Calibrator::normalize(const std::vector<float>& gamma, std::vector<float>& out) const {
  const int H = c_.hidden_size;
  out.resize(x_.size());
  for (size_t t = 0; t < tokens_.size(); ++t)
    reference::rms_norm(&x_[t * H], gamma.data(), &out[t * H], H, static_cast<float>(c_.rms_norm_eps));
}

void Calibrator::matmul(const std::vector<float>& x, int64_t in, const std::vector<float>& w, int64_t out_rows,
                        std::vector<float>& y) {
  const int64_t T = static_cast<int64_t>(tokens_.size());
  y.assign(T * out_rows, 0.0f);
  pool_.parallel_for(out_rows, 16, [&](int64_t r0, int64_t r1) {
    reference::matmul_f32(x.data(), T, in, w.data(), r0, r1, y.data(), out_rows);
  });
}

// Sets the ordinary channels of `gamma` (base values ~[0.5, 1.5]) so that the
// normalized residual has rms 1 over them; outlier channels keep their weight.
void Calibrator::scale_norm(float* gamma) {
  const int H = c_.hidden_size;
  double ss = 0, n = 0;
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const float* x = &x_[t * H];
    double ms = 0;
    for (int i = 0; i < H; ++i) ms += static_cast<double>(x[i]) * x[i];
    const double inv = 1.0 / std::sqrt(ms / H + c_.rms_norm_eps);
    for (int i = 0; i < H; ++i) {
      if (plan_.is_outlier(i)) continue;
      double v = x[i] * inv * gamma[i];
      ss += v * v;
      n += 1;
    }
  }
  const double gain = 1.0 / std::sqrt(ss / std::max(1.0, n));
  for (int i = 0; i < H; ++i)
    if (!plan_.is_outlier(i)) gamma[i] = static_cast<float>(gamma[i] * gain);
}

void Calibrator::run_attention(int l) {
  const int H = c_.hidden_size, Q = c_.q_dim(), KV = c_.kv_dim(), D = c_.head_dim;
  const float eps = static_cast<float>(c_.rms_norm_eps);
  std::vector<float> xn, q, k, v;
  normalize(layer_["input_layernorm.weight"], xn);
  matmul(xn, H, layer_["self_attn.q_proj.weight"], Q, q);
  matmul(xn, H, layer_["self_attn.k_proj.weight"], KV, k);
  matmul(xn, H, layer_["self_attn.v_proj.weight"], KV, v);
  const auto& qn = layer_["self_attn.q_norm.weight"];
  const auto& kn = layer_["self_attn.k_norm.weight"];
  std::vector<float> table(D), scores(seq_len_), att(tokens_.size() * Q);
  for (int s = 0; s < sequences_; ++s)
    for (int p = 0; p < seq_len_; ++p) {
      const size_t t = static_cast<size_t>(s) * seq_len_ + p;
      reference::rope_table(p, D, c_.rope_theta, table.data());
      for (int h = 0; h < c_.num_attention_heads; ++h) {
        reference::rms_norm(&q[t * Q + h * D], qn.data(), &q[t * Q + h * D], D, eps);
        reference::apply_rope(&q[t * Q + h * D], D, table.data());
      }
      for (int h = 0; h < c_.num_key_value_heads; ++h) {
        reference::rms_norm(&k[t * KV + h * D], kn.data(), &k[t * KV + h * D], D, eps);
        reference::apply_rope(&k[t * KV + h * D], D, table.data());
      }
    }
  for (int s = 0; s < sequences_; ++s)
    for (int p = 0; p < seq_len_; ++p) {
      const size_t t = static_cast<size_t>(s) * seq_len_ + p, t0 = static_cast<size_t>(s) * seq_len_;
      for (int h = 0; h < c_.num_attention_heads; ++h) {
        const int kvh = h / c_.group_size();
        reference::attend(&q[t * Q + h * D], &k[t0 * KV + kvh * D], &v[t0 * KV + kvh * D], p + 1, KV, D,
                          scores.data(), &att[t * Q + h * D]);
      }
    }
  std::vector<float> o;
  matmul(att, Q, layer_["self_attn.o_proj.weight"], H, o);
  for (size_t i = 0; i < x_.size(); ++i) x_[i] += o[i];
}

void Calibrator::run_mlp(int l) {
  const int H = c_.hidden_size, M = c_.intermediate_size;
  std::vector<float> xn, gate, up, down;
  normalize(layer_["post_attention_layernorm.weight"], xn);
  matmul(xn, H, layer_["mlp.gate_proj.weight"], M, gate);
  matmul(xn, H, layer_["mlp.up_proj.weight"], M, up);
  reference::silu_mul(gate.data(), up.data(), gate.data(), static_cast<int>(gate.size()));
  matmul(gate, M, layer_["mlp.down_proj.weight"], H, down);
  for (size_t i = 0; i < x_.size(); ++i) x_[i] += down[i];
}

void Calibrator::process(const std::string& name, const std::vector<int64_t>& shape, int64_t first_row,
                         int64_t rows, int64_t cols, float* data) {
  const int H = c_.hidden_size, M = c_.intermediate_size;
  auto round_all = [&] {
    for (int64_t i = 0; i < rows * cols; ++i) data[i] = bf16_to_float(float_to_bf16(data[i]));
  };

  if (name == "model.embed_tokens.weight") {
    round_all();
    for (size_t t = 0; t < tokens_.size(); ++t)
      if (tokens_[t] >= first_row && tokens_[t] < first_row + rows)
        std::copy_n(data + (tokens_[t] - first_row) * cols, H, &x_[t * H]);
    return;
  }
  if (name == "model.norm.weight") {
    scale_norm(data);
    round_all();
    return;
  }
  if (name.rfind("model.layers.", 0) != 0) {  // lm_head
    round_all();
    return;
  }
  const size_t dot = name.find('.', 13);
  const int l = std::stoi(name.substr(13, dot - 13));
  const std::string suffix = name.substr(dot + 1);
  const bool planting = l < plan_.layers();

  if (suffix == "post_attention_layernorm.weight") {
    run_attention(l);
    scale_norm(data);
  } else if (suffix == "input_layernorm.weight") {
    scale_norm(data);
  } else if (planting && (suffix == "mlp.gate_proj.weight" || suffix == "mlp.up_proj.weight")) {
    // The dedicated neuron of channel k reads channel k alone, sized so its
    // pre-activation is plan.gate / plan.up for the measured normalized input.
    if (xn_outlier_.size() <= static_cast<size_t>(l)) {
      std::vector<float> xn;
      normalize(layer_["post_attention_layernorm.weight"], xn);
      std::vector<float> means;
      for (int ch : plan_.channels) {
        double sum = 0;
        for (size_t t = 0; t < tokens_.size(); ++t) sum += xn[t * H + ch];
        means.push_back(static_cast<float>(sum / tokens_.size()));
      }
      xn_outlier_.push_back(means);
    }
    const float target = suffix == "mlp.gate_proj.weight" ? plan_.gate : plan_.up;
    for (size_t k = 0; k < plan_.channels.size(); ++k) {
      const int64_t row = plan_.neuron(k, M) - first_row;
      if (row < 0 || row >= rows) continue;
      std::fill_n(data + row * cols, cols, 0.0f);
      data[row * cols + plan_.channels[k]] = target / xn_outlier_[l][k];
    }
  } else if (planting && suffix == "mlp.down_proj.weight") {
    // Dedicated neurons write only into their own channel, a lot.
    const float act = plan_.up * plan_.gate / (1.0f + std::exp(-plan_.gate));
    for (int64_t row = 0; row < rows; ++row)
      for (size_t k = 0; k < plan_.channels.size(); ++k)
        data[row * cols + plan_.neuron(k, M)] =
            first_row + row == plan_.channels[k] ? plan_.added[l][k] / act : 0.0f;
  }
  round_all();

  // Keep this layer's tensors for the calibration pass.
  auto& store = layer_[suffix];
  const int64_t total = shape.size() > 1 ? shape[0] * shape[1] : shape[0];
  if (first_row == 0) store.assign(total, 0.0f);
  std::copy_n(data, rows * cols, store.begin() + first_row * cols);

  if (suffix == "mlp.down_proj.weight" && first_row + rows == shape[0]) {
    run_mlp(l);
    layer_.clear();
  }
}

}  // namespace qwen3::mkmodel
