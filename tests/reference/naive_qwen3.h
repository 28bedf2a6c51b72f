// An independent, deliberately plain Qwen3 forward pass in double precision,
// written for the tests from the architecture description (not from the
// reference code): every position is recomputed from scratch over the whole
// prefix, no KV cache, no tiling, no threads. Slow, and only meant to check
// the reference on small models.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "model/model_dir.h"

namespace qwen3::test {

class NaiveQwen3 {
 public:
  explicit NaiveQwen3(const ModelDir& m) : m_(m), c_(m.config()) {}

  // Logits of the last position after feeding `tokens` from position 0.
  std::vector<double> last_logits(const std::vector<int32_t>& tokens) const {
    const int H = c_.hidden_size;
    std::vector<std::vector<double>> x(tokens.size(), std::vector<double>(H));
    for (size_t t = 0; t < tokens.size(); ++t)
      for (int i = 0; i < H; ++i) x[t][i] = m_.embed_tokens().at(static_cast<int64_t>(tokens[t]) * H + i);
    for (int l = 0; l < c_.num_hidden_layers; ++l) {
      auto attn = attention_block(l, x);
      for (size_t t = 0; t < x.size(); ++t)
        for (int i = 0; i < H; ++i) x[t][i] += attn[t][i];
      for (size_t t = 0; t < x.size(); ++t) {
        auto m = mlp_block(l, x[t]);
        for (int i = 0; i < H; ++i) x[t][i] += m[i];
      }
    }
    auto h = rmsnorm(x.back(), weights("model.norm.weight"));
    const TensorView& head = m_.lm_head();
    std::vector<double> logits(c_.vocab_size);
    for (int v = 0; v < c_.vocab_size; ++v) {
      double s = 0;
      for (int i = 0; i < H; ++i) s += h[i] * head.at(static_cast<int64_t>(v) * H + i);
      logits[v] = s;
    }
    return logits;
  }

 private:
  std::vector<double> weights(const std::string& name) const {
    const TensorView& t = m_.tensor(name);
    std::vector<double> w(t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) w[i] = t.at(i);
    return w;
  }
  std::vector<double> layer_weights(int l, const std::string& suffix) const {
    return weights("model.layers." + std::to_string(l) + "." + suffix);
  }
  std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& g) const {
    double ms = 0;
    for (double v : x) ms += v * v;
    ms /= static_cast<double>(x.size());
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] / std::sqrt(ms + c_.rms_norm_eps) * g[i];
    return out;
  }
  // out = W x with W [rows, cols] row-major.
  static std::vector<double> apply(const std::vector<double>& w, const std::vector<double>& x) {
    const size_t cols = x.size(), rows = w.size() / cols;
    std::vector<double> out(rows, 0.0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t k = 0; k < cols; ++k) out[r] += w[r * cols + k] * x[k];
    return out;
  }
  // Rotates pairs (i, i + d/2) of one head by position * theta^(-2i/d).
  void rotate(double* head, int pos) const {
    const int d = c_.head_dim;
    for (int i = 0; i < d / 2; ++i) {
      const double angle = pos / std::pow(c_.rope_theta, 2.0 * i / d);
      const double a = head[i], b = head[i + d / 2];
      head[i] = a * std::cos(angle) - b * std::sin(angle);
      head[i + d / 2] = a * std::sin(angle) + b * std::cos(angle);
    }
  }
  std::vector<std::vector<double>> attention_block(int l, const std::vector<std::vector<double>>& x) const {
    const int d = c_.head_dim, nh = c_.num_attention_heads, nkv = c_.num_key_value_heads;
    const auto g = layer_weights(l, "input_layernorm.weight");
    const auto wq = layer_weights(l, "self_attn.q_proj.weight"), wk = layer_weights(l, "self_attn.k_proj.weight"),
               wv = layer_weights(l, "self_attn.v_proj.weight"), wo = layer_weights(l, "self_attn.o_proj.weight");
    const auto qn = layer_weights(l, "self_attn.q_norm.weight"), kn = layer_weights(l, "self_attn.k_norm.weight");
    const size_t T = x.size();
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (size_t t = 0; t < T; ++t) {
      auto h = rmsnorm(x[t], g);
      q[t] = apply(wq, h);
      k[t] = apply(wk, h);
      v[t] = apply(wv, h);
      for (int hd = 0; hd < nh; ++hd) {
        std::vector<double> part(q[t].begin() + hd * d, q[t].begin() + (hd + 1) * d);
        part = rmsnorm(part, qn);
        rotate(part.data(), static_cast<int>(t));
        std::copy(part.begin(), part.end(), q[t].begin() + hd * d);
      }
      for (int hd = 0; hd < nkv; ++hd) {
        std::vector<double> part(k[t].begin() + hd * d, k[t].begin() + (hd + 1) * d);
        part = rmsnorm(part, kn);
        rotate(part.data(), static_cast<int>(t));
        std::copy(part.begin(), part.end(), k[t].begin() + hd * d);
      }
    }
    std::vector<std::vector<double>> out(T);
    for (size_t t = 0; t < T; ++t) {
      std::vector<double> concat(static_cast<size_t>(nh) * d, 0.0);
      for (int hd = 0; hd < nh; ++hd) {
        const int kvh = hd / (nh / nkv);
        std::vector<double> w(t + 1);
        double mx = -1e300;
        for (size_t s = 0; s <= t; ++s) {
          double dot = 0;
          for (int i = 0; i < d; ++i) dot += q[t][hd * d + i] * k[s][kvh * d + i];
          w[s] = dot / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, w[s]);
        }
        double z = 0;
        for (auto& e : w) z += (e = std::exp(e - mx));
        for (size_t s = 0; s <= t; ++s)
          for (int i = 0; i < d; ++i) concat[hd * d + i] += w[s] / z * v[s][kvh * d + i];
      }
      out[t] = apply(wo, concat);
    }
    return out;
  }
  std::vector<double> mlp_block(int l, const std::vector<double>& x) const {
    auto h = rmsnorm(x, layer_weights(l, "post_attention_layernorm.weight"));
    auto gate = apply(layer_weights(l, "mlp.gate_proj.weight"), h);
    auto up = apply(layer_weights(l, "mlp.up_proj.weight"), h);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
    return apply(layer_weights(l, "mlp.down_proj.weight"), gate);
  }

  const ModelDir& m_;
  const ModelConfig& c_;
};

}  // namespace qwen3::test
