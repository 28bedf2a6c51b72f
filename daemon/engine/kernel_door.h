// The doorbell of kernel-started generations (bpf_ops/ops_kdoor_bell.h,
// docs/kernel-driver.md "Kernel-started generations"): loaded with the kernel
// driver, armed at load, enabled by the daemon's kernel clients once the
// model is ready. Enabling fills the kernel's tables (Qwen3's byte-level base
// token of each byte, each token's text, the EOS ids), reserves the KV caches
// of the kernel pool's sessions, and pins the maps a BPF client submits
// through. From then on a client's request runs with no user-space step; the
// daemon only reads back what the kernel wrote (sessions(), counters()).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/engine_owner.h"

struct qk_kd_state;
struct qk_kd_session;
struct qk_result_slot;
struct qk_kd_text;

namespace qwen3::engine {

class BpfPrograms;

struct KernelDoorConfig {
  std::string pin_dir;                 // where the client maps are pinned ("": not pinned)
  uint32_t owner_uid = 65534;          // the sessions' owner (kernel_client_uid)
  std::array<int32_t, 256> byte_ids{};  // each byte's base token
  std::vector<std::string> token_text;  // each id's bytes ("" for special tokens)
  std::vector<int32_t> stop_ids;        // EOS ids (at most 16)
  int kv_positions = 512;               // each kernel session's KV capacity
};

struct KernelSessionInfo {
  std::string id;
  uint32_t owner_uid = 0, positions = 0, capacity = 0, generations = 0, tokens = 0, request_id = 0;
  bool running = false;
  size_t kv_bytes = 0;
};

struct KernelDoorCounters {
  uint64_t rung = 0, started = 0, served = 0, busy = 0, shed = 0, refused = 0, tokens = 0;
  uint64_t yields = 0;        // kernel-started generations paused at a token for the daemon
  uint64_t daemon_waits = 0;  // the daemon's holds that waited for a kernel-started generation
  uint32_t pending = 0;
};

class KernelDoor {
 public:
  using MakeKv = std::function<std::unique_ptr<KvCache>(int)>;
  // progs must have been loaded with layout().drive. Arms the doorbell.
  KernelDoor(BpfPrograms& progs, MakeKv make_kv);
  ~KernelDoor();
  KernelDoor(const KernelDoor&) = delete;
  KernelDoor& operator=(const KernelDoor&) = delete;

  // Throws qwen3::Error (a table too large, the KV budget, a pin).
  void enable(const KernelDoorConfig& config);
  // Refuses new requests, waits for a running one, unpins. Idempotent.
  void disable();
  bool enabled() const;

  std::vector<KernelSessionInfo> sessions() const;
  KernelDoorCounters counters() const;
  EngineOwner& owner() { return owner_; }
  // The pinned names (under KernelDoorConfig::pin_dir).
  static const std::vector<std::string>& pinned_maps();

 private:
  void fill_tables(const KernelDoorConfig& config);
  void reserve_sessions(const KernelDoorConfig& config);
  void pin(const std::string& dir);
  void unpin();

  BpfPrograms& progs_;
  MakeKv make_kv_;
  EngineOwner owner_;
  qk_kd_state* state_ = nullptr;
  qk_kd_session* sessions_ = nullptr;
  qk_result_slot* results_ = nullptr;
  qk_kd_text* text_ = nullptr;
  std::vector<std::unique_ptr<KvCache>> pool_;
  std::string pinned_dir_;
};

}  // namespace qwen3::engine
