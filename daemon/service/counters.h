// Request counters reported by GetStatus.
#pragma once

#include <atomic>
#include <cstdint>

namespace qwen3 {

struct RequestCounters {
  std::atomic<uint64_t> tokenize{0}, detokenize{0}, forward{0}, generate{0}, sessions{0}, verify{0};
  std::atomic<uint64_t> errors{0}, cancelled{0};
  std::atomic<uint64_t> prompt_tokens{0}, cached_tokens{0}, completion_tokens{0};
  std::atomic<int> active_streams{0};
};

}  // namespace qwen3
