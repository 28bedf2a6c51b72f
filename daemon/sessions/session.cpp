#include "sessions/session.h"

#include <algorithm>

namespace qwen3 {

int reusable_prefix(std::span<const int32_t> history, int cached_positions,
                    std::span<const int32_t> tokens) {
  const size_t limit = std::min({history.size(), static_cast<size_t>(std::max(cached_positions, 0)),
                                 tokens.empty() ? size_t{0} : tokens.size() - 1});
  size_t n = 0;
  while (n < limit && history[n] == tokens[n]) ++n;
  return static_cast<int>(n);
}

}  // namespace qwen3
