// The kernel path of kernel clients (docs/kernel-clients.md, "The kernel
// path"): once the model is ready, the daemon enables the engine's doorbell
// (engine/kernel_door.h) with the tokenizer's tables (each byte's base token,
// each token's bytes), the EOS ids, kernel_client_uid and the pin directory.
// From then on a BPF client's request runs with no user-space step; this
// side only reads back what the kernel counted.
#pragma once

#include <atomic>
#include <functional>
#include <string>

namespace qwen3 {
struct Runtime;
namespace engine {
class KernelDoor;
struct KernelDoorConfig;
}  // namespace engine
class Tokenizer;
}  // namespace qwen3

namespace qwen3::kclient {

// Qwen3's byte-level base token of each byte, and each id's bytes ("" for
// special tokens), from the tokenizer.
void kernel_tables(const Tokenizer& tok, int vocab, engine::KernelDoorConfig& out);

class KernelPath {
 public:
  KernelPath(std::function<Runtime*()> runtime, std::string pin_dir, uint32_t owner_uid);
  ~KernelPath();
  // Enables the doorbell once the runtime is ready (called from the broker's
  // loop); a failure is logged once and the kernel path stays off.
  void poll();
  // Refuses further requests and unpins (the daemon stops).
  void stop();
  bool enabled() const { return door_.load() != nullptr; }
  std::string metrics_text() const;

 private:
  std::function<Runtime*()> runtime_;
  std::string pin_dir_;
  uint32_t owner_uid_;
  std::atomic<engine::KernelDoor*> door_{nullptr};
  bool failed_ = false;
};

}  // namespace qwen3::kclient
