#include "engine/rope_table.h"

#include <cmath>
#include <vector>

namespace qwen3::engine {

void fill_rope_table(int32_t* table, uint32_t positions, uint32_t head_dim, double theta) {
  const uint32_t half = head_dim / 2;
  std::vector<double> inv_freq(half);
  for (uint32_t i = 0; i < half; i++) inv_freq[i] = std::pow(theta, -2.0 * i / head_dim);
  for (uint32_t p = 0; p < positions; p++) {
    int32_t* row = table + size_t(p) * head_dim;
    for (uint32_t i = 0; i < half; i++) {
      double a = p * inv_freq[i];
      row[i] = static_cast<int32_t>(std::llround(std::cos(a) * 1073741824.0));
      row[half + i] = static_cast<int32_t>(std::llround(std::sin(a) * 1073741824.0));
    }
  }
}

}  // namespace qwen3::engine
