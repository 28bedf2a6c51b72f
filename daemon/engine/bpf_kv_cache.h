// A session's KV cache: one BPF array map (one entry per block of
// QN_KV_BLOCK positions of one kv head of one layer: int16 K/V with
// per-vector scales, or the compact one-byte-per-value layout; layout.h,
// docs/kv-cache.md) created with the session and freed with it, reachable by
// the programs through a slot of the outer ARRAY_OF_MAPS map.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/backend.h"

struct qn_shape;

namespace qwen3::engine {

// The outer map's free slots; shared by the backend and every cache so a
// cache outliving the backend still releases its slot cleanly.
class KvSlots {
 public:
  KvSlots(int outer_fd, const qn_shape& shape);  // dups outer_fd
  ~KvSlots();
  uint32_t acquire();          // throws resource_exhausted when all slots are in use
  void release(uint32_t slot);
  int outer_fd() const { return outer_fd_; }
  uint32_t value_size() const { return value_size_; }
  uint64_t entries(int positions) const;  // of a cache holding that many positions
  int live() const;

 private:
  int outer_fd_;
  uint32_t value_size_;
  uint32_t n_layers_, n_kv_heads_;
  mutable std::mutex mu_;
  std::vector<bool> used_;
};

class BpfKvCache : public KvCache {
 public:
  BpfKvCache(std::shared_ptr<KvSlots> slots, int max_context);
  ~BpfKvCache() override;
  int positions() const override { return positions_; }
  int max_context() const override { return max_context_; }
  size_t bytes() const override { return slots_->entries(max_context_) * slots_->value_size(); }
  void truncate(int n) override;

  void set_positions(int n) { positions_ = n; }
  uint32_t slot() const { return slot_; }
  bool belongs_to(const KvSlots* slots) const { return slots_.get() == slots; }
  int map_fd() const { return fd_; }

 private:
  std::shared_ptr<KvSlots> slots_;
  int max_context_;
  int positions_ = 0;
  int fd_ = -1;
  uint32_t slot_ = 0;
};

}  // namespace qwen3::engine
