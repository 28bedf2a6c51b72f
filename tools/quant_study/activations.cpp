#include "activations.h"

#include <algorithm>
#include <cmath>

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

MatrixInputFn act8_hook(int group, std::map<std::string, InputQuant> inputs) {
  return [group, inputs = std::move(inputs)](TraceStage stage, int layer, int rows, int cols, float* data) {
    auto it = inputs.find(input_key(stage, layer));
    const InputQuant* iq = it == inputs.end() ? nullptr : &it->second;
    const int g = group > 0 ? group : cols;
    std::vector<double> y(cols);
    for (int r = 0; r < rows; r++) {
      float* x = data + size_t(r) * cols;
      for (int k = 0; k < cols; k++) y[k] = iq && !iq->div.empty() ? x[k] / iq->div[k] : x[k];
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
