// Who holds the engine: the activation maps, sample_buf and the kernel
// driver's chain are shared by the daemon's passes, its kernel-driver
// generations and generations a kernel client started through the doorbell
// (bpf_ops/ops_kdoor_bell.h). One word in the mmapped drive_state
// (drive_abi.h: owner) says who: the daemon takes it by compare-and-swap
// before a pass batch or a kernel-driver submission, the doorbell before a
// kernel-started generation. While the kernel holds it, the daemon raises
// `yield` (the chain ends a kernel-started generation at its next token) and
// waits; releasing it rings the doorbell when kernel requests wait.
// docs/kernel-driver.md, "Kernel-started generations".
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "drive_abi.h"

namespace qwen3::engine {

class EngineOwner {
 public:
  // state: the mmapped drive_state; nullptr (no kernel driver loaded): every
  // hold is free. after_release: called after each release (rings the doorbell
  // when requests wait).
  EngineOwner(qn_drive_state* state, std::function<void()> after_release);
  EngineOwner(const EngineOwner&) = delete;
  EngineOwner& operator=(const EngineOwner&) = delete;

  class Hold {
   public:
    explicit Hold(EngineOwner* o) : o_(o) {}
    Hold(Hold&& h) noexcept : o_(h.o_) { h.o_ = nullptr; }
    Hold(const Hold&) = delete;
    ~Hold() {
      if (o_) o_->release();
    }

   private:
    EngineOwner* o_;
  };
  // Waits until the engine is the daemon's (a kernel-started generation ends
  // at its next token boundary) and every link of the last chain returned.
  // Throws qwen3::Error when the kernel keeps it for 120 s.
  [[nodiscard]] Hold hold();

  uint64_t waits() const { return waits_.load(std::memory_order_relaxed); }
  double waited_ms() const { return double(waited_us_.load(std::memory_order_relaxed)) / 1e3; }

 private:
  void release();

  qn_drive_state* st_;
  std::function<void()> after_release_;
  std::atomic<uint64_t> waits_{0}, waited_us_{0};
};

}  // namespace qwen3::engine
