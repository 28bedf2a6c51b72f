// Elapsed wall time, as the core's outcomes report it (elapsed_ms, the
// per-token timings).
#pragma once

#include <chrono>

namespace qwen3 {

inline double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace qwen3
