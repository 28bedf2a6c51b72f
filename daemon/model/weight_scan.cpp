#include "model/weight_scan.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/error.h"

namespace qwen3 {
namespace {

constexpr int64_t kChunkElements = 1 << 20;

// True when any element has an all-ones exponent (NaN or Inf). Branch-free so
// the compiler vectorizes it.
bool chunk_has_nonfinite(const TensorView& t, int64_t first, int64_t count) {
  const uint8_t* p = t.data + first * static_cast<int64_t>(dtype_size(t.dtype));
  if (t.dtype == DType::f32) {
    uint32_t bad = 0;
    for (int64_t i = 0; i < count; ++i) {
      uint32_t v;
      std::memcpy(&v, p + i * 4, 4);
      bad |= static_cast<uint32_t>((v & 0x7f800000u) == 0x7f800000u);
    }
    return bad != 0;
  }
  const uint16_t mask = t.dtype == DType::bf16 ? 0x7f80 : 0x7c00;
  uint16_t bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    uint16_t v;
    std::memcpy(&v, p + i * 2, 2);
    bad |= static_cast<uint16_t>((v & mask) == mask);
  }
  return bad != 0;
}

}  // namespace

void check_finite(const std::vector<const TensorView*>& tensors, int threads) {
  struct Chunk { const TensorView* t; int64_t first, count; };
  std::vector<Chunk> chunks;
  for (const TensorView* t : tensors)
    for (int64_t first = 0; first < t->numel(); first += kChunkElements)
      chunks.push_back({t, first, std::min(kChunkElements, t->numel() - first)});

  std::atomic<size_t> next{0};
  std::mutex mu;
  size_t first_bad = chunks.size();  // lowest bad chunk index, for a deterministic message
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < chunks.size();) {
      const Chunk& c = chunks[i];
      if (chunk_has_nonfinite(*c.t, c.first, c.count)) {
        std::lock_guard<std::mutex> lock(mu);
        first_bad = std::min(first_bad, i);
      }
    }
  };
  threads = std::max(1, threads);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads && static_cast<size_t>(i) < chunks.size(); ++i) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (first_bad == chunks.size()) return;

  const Chunk& c = chunks[first_bad];
  for (int64_t i = c.first; i < c.first + c.count; ++i) {
    float v = c.t->at(i);
    if (std::isfinite(v)) continue;
    std::string where = "element " + std::to_string(i);
    if (c.t->shape.size() >= 2)
      where += " (row " + std::to_string(i / c.t->cols()) + ", column " + std::to_string(i % c.t->cols()) + ")";
    throw invalid_argument(c.t->file + ": tensor '" + c.t->name + "' " + where + " is " +
                           (std::isnan(v) ? "NaN" : "Inf") + "; the weights are corrupt");
  }
}

}  // namespace qwen3
