#include "activations.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "numerics.h"  // qn_input_shift, qn_round_shift

namespace qwen3::quant_study {

std::string input_key(TraceStage stage, int layer) {
  switch (stage) {
    case TraceStage::attn_norm: return "attn_norm." + std::to_string(layer);
    case TraceStage::attention: return "attention." + std::to_string(layer);
    case TraceStage::mlp_norm: return "mlp_norm." + std::to_string(layer);
    case TraceStage::act: return "act." + std::to_string(layer);
    case TraceStage::final_norm: return "final_norm";
    default: return "";
  }
}

namespace {

bool normed_stage(TraceStage stage) {
  return stage == TraceStage::attn_norm || stage == TraceStage::mlp_norm || stage == TraceStage::final_norm;
}

// The engine's block floating point: Q16 values, then one rounded right shift so
// that the largest keeps `bits` bits, with the engine's own qn_input_shift and
// qn_round_shift.
void requantize_bfp(std::vector<double>& y, int bits) {
  std::vector<int64_t> q(y.size());
  uint64_t max_abs = 0;
  for (size_t k = 0; k < y.size(); k++) {
    q[k] = std::llround(y[k] * 65536.0);
    max_abs = std::max<uint64_t>(max_abs, static_cast<uint64_t>(std::llabs(q[k])));
  }
  const int s = qn_input_shift(max_abs, bits);
  for (size_t k = 0; k < y.size(); k++) y[k] = std::ldexp(double(qn_round_shift(q[k], s)), s - 16);
}

}  // namespace

MatrixInputFn act8_hook(Act8 a, std::map<std::string, InputQuant> inputs) {
  return [a, inputs = std::move(inputs)](TraceStage stage, int layer, int rows, int cols, float* data) {
    if (a.normed_only && !normed_stage(stage)) return;
    auto it = inputs.find(input_key(stage, layer));
    const InputQuant* iq = it == inputs.end() ? nullptr : &it->second;
    const int g = a.group > 0 ? a.group : cols;
    std::vector<double> y(cols);
    for (int r = 0; r < rows; r++) {
      float* x = data + size_t(r) * cols;
      for (int k = 0; k < cols; k++) y[k] = iq && !iq->div.empty() ? x[k] / iq->div[k] : x[k];
      if (a.fix_frac > 0)
        for (double& v : y) v = std::ldexp(double(std::llround(std::ldexp(v, a.fix_frac))), -a.fix_frac);
      if (a.bfp_bits > 0) requantize_bfp(y, a.bfp_bits);
      auto exact = [&](int k) { return iq && !iq->exact.empty() && iq->exact[k]; };
      for (int c0 = 0; c0 < cols; c0 += g) {
        const int n = std::min(g, cols - c0);
        double mx = 0;
        for (int k = c0; k < c0 + n; k++)
          if (!exact(k)) mx = std::max(mx, std::fabs(y[k]));
        const double s = mx / 127.0;
        for (int k = c0; k < c0 + n; k++) {
          if (exact(k)) continue;
          const double q = s > 0 ? std::clamp(std::nearbyint(y[k] / s), -127.0, 127.0) * s : 0.0;
          x[k] = static_cast<float>(iq && !iq->div.empty() ? q * iq->div[k] : q);
        }
      }
    }
  };
}

}  // namespace qwen3::quant_study
