#include "engine/engine_owner.h"

#include <chrono>
#include <string>
#include <thread>

#include "common/error.h"

namespace qwen3::engine {

namespace {
constexpr auto kGiveUp = std::chrono::seconds(120);
}

EngineOwner::EngineOwner(qn_drive_state* state, std::function<void()> after_release)
    : st_(state), after_release_(std::move(after_release)) {}

EngineOwner::Hold EngineOwner::hold() {
  if (!st_) return Hold(nullptr);
  std::atomic_ref<uint32_t> owner(st_->owner);
  std::atomic_ref<uint32_t> yield(st_->yield);
  const auto t0 = std::chrono::steady_clock::now();
  bool waited = false;
  for (;;) {
    uint32_t expect = QN_OWNER_FREE;
    if (owner.compare_exchange_strong(expect, QN_OWNER_DAEMON)) break;
    if (!waited) {
      waited = true;
      waits_.fetch_add(1, std::memory_order_relaxed);
      std::atomic_ref<uint64_t>(st_->owner_waits).fetch_add(1);
    }
    yield.store(1);  // a kernel-started generation ends at its next token
    if (std::chrono::steady_clock::now() - t0 > kGiveUp)
      throw Error("the engine is held by a kernel-started generation for 120 s (drive_state.owner " +
                  std::to_string(expect) + ", link " + std::to_string(st_->link) + ")");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (waited) {
    yield.store(0);
    waited_us_.fetch_add(uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                                      std::chrono::steady_clock::now() - t0).count()),
                         std::memory_order_relaxed);
  }
  // The last chain's last link may still be returning: the maps are used only after it.
  std::atomic_ref<uint32_t> running(st_->running), active(st_->active);
  for (int spin = 0; (running.load() || active.load()) && spin < 10000000; spin++) std::this_thread::yield();
  if (running.load() || active.load()) {
    owner.store(QN_OWNER_FREE);
    throw Error("a kernel-started generation's chain did not come to rest (drive_state.running/active)");
  }
  return Hold(this);
}

void EngineOwner::release() {
  std::atomic_ref<uint32_t>(st_->owner).store(QN_OWNER_FREE);
  if (after_release_) after_release_();
}

}  // namespace qwen3::engine
