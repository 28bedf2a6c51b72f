#include "sessions/session.h"

#include <algorithm>
#include <cstdio>

namespace qwen3 {

int reusable_prefix(std::span<const int32_t> history, int cached_positions,
                    std::span<const int32_t> tokens) {
  const size_t limit = std::min({history.size(), static_cast<size_t>(std::max(cached_positions, 0)),
                                 tokens.empty() ? size_t{0} : tokens.size() - 1});
  size_t n = 0;
  while (n < limit && history[n] == tokens[n]) ++n;
  return static_cast<int>(n);
}

std::string printable(std::string_view s, size_t max) {
  std::string out;
  size_t i = 0;
  for (; i < s.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c > 0x7e) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < s.size()) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace qwen3
