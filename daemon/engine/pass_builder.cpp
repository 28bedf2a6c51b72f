#include "engine/pass_builder.h"

#include <algorithm>

#include "common/error.h"

namespace qwen3::engine {

std::vector<Pass> pack_passes(std::span<const uint32_t> lengths, uint32_t capacity) {
  if (capacity == 0) throw invalid_argument("pack_passes needs a pass capacity of at least one position");
  std::vector<Pass> passes;
  for (uint32_t item = 0; item < lengths.size(); item++) {
    uint32_t done = 0;
    while (done < lengths[item]) {
      if (passes.empty() || passes.back().npos == capacity) passes.emplace_back();
      Pass& p = passes.back();
      const uint32_t n = std::min(lengths[item] - done, capacity - p.npos);
      p.slices.push_back({item, done, p.npos, n});
      p.npos += n;
      done += n;
    }
  }
  return passes;
}

}  // namespace qwen3::engine
