#include "sampling/kernel_params.h"

#include <algorithm>
#include <cmath>

namespace qwen3 {

KernelSamplingParams kernel_params(const SamplingParams& params) {
  KernelSamplingParams k;
  k.top_k = params.top_k > 0 ? static_cast<uint32_t>(params.top_k) : 0;
  k.greedy = params.temperature < kMinSamplingTemperature;
  k.penalty = params.repetition_penalty != 1.0f;
  if (k.penalty) {
    int e = 0;
    const double f = std::frexp(double(params.repetition_penalty), &e);  // pen = f * 2^e, f in [0.5, 1)
    if (e < -8) {  // below 2^-9: clamped
      k.pm = 1u << 23, k.pe = 32;
    } else if (e > 24) {  // 2^24 and above: clamped
      k.pm = (1u << 24) - 1, k.pe = 0;
    } else {
      k.pm = static_cast<uint32_t>(std::ldexp(f, 24));  // a float's 24-bit mantissa: exact
      k.pe = static_cast<uint32_t>(24 - e);
    }
  }
  int e = 0;
  const double f = std::frexp(double(std::max(params.temperature, kMinSamplingTemperature)), &e);
  if (e > 48) {  // T >= 2^48: clamped to 2^47 (every weight within 2^-15 nats of 1 either way)
    k.tm = 1u << 31, k.te = -16;
  } else {
    k.tm = static_cast<uint32_t>(std::ldexp(f, 32));
    k.te = 32 - e;
  }
  const double mp = std::nearbyint(std::ldexp(double(params.min_p), 44));
  k.min_p_q44 = static_cast<uint64_t>(std::clamp(mp, 0.0, std::ldexp(1.0, 44) - 1));
  const double tp = std::nearbyint(std::ldexp(double(params.top_p), 32));
  k.top_p_q32 = static_cast<uint64_t>(std::clamp(tp, 1.0, std::ldexp(1.0, 32)));
  k.seed = params.seed;
  return k;
}

}  // namespace qwen3
