#include "engine/kernel_door.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "common/bpffs.h"
#include "common/error.h"
#include "engine/bpf_kv_cache.h"
#include "engine/bpf_programs.h"
#include "kclient_abi.h"

namespace qwen3::engine {

namespace {

template <typename T>
std::atomic_ref<T> at(T& v) {
  return std::atomic_ref<T>(v);
}

}  // namespace

const std::vector<std::string>& KernelDoor::pinned_maps() {
  static const std::vector<std::string> names = {"kd_requests", "kd_bell", "kd_state", "kd_sessions", "kd_results"};
  return names;
}

KernelDoor::KernelDoor(BpfPrograms& progs, MakeKv make_kv)
    : progs_(progs),
      make_kv_(std::move(make_kv)),
      owner_(progs.drive_state(), [this] {
        if (state_ && state_->enabled && at(state_->pending).load()) progs_.kdoor_ring();
      }) {
  if (!progs_.drive()) throw Error("KernelDoor needs the programs loaded with the kernel driver");
  state_ = static_cast<qk_kd_state*>(progs_.map_mmap("kd_state"));
  sessions_ = static_cast<qk_kd_session*>(progs_.map_mmap("kd_sessions"));
  results_ = static_cast<qk_result_slot*>(progs_.map_mmap("kd_results"));
  text_ = static_cast<qk_kd_text*>(progs_.map_mmap("kd_text"));
  progs_.kdoor_arm();
}

KernelDoor::~KernelDoor() {
  try {
    disable();
  } catch (...) {
  }
}

bool KernelDoor::enabled() const { return state_ && at(state_->enabled).load() != 0; }

void KernelDoor::fill_tables(const KernelDoorConfig& c) {
  const uint32_t vocab = progs_.layout().shape.vocab;
  if (c.stop_ids.size() > 16) throw invalid_argument("kernel path: more than 16 EOS ids");
  std::memset(text_, 0, sizeof(qk_kd_text) * vocab);
  uint32_t cut = 0;
  for (size_t id = 0; id < c.token_text.size() && id < vocab; id++) {
    const std::string& t = c.token_text[id];
    const size_t n = std::min<size_t>(t.size(), QK_KD_TEXT_BYTES);
    if (t.size() > n) cut++;
    text_[id].len = static_cast<uint8_t>(n);
    std::memcpy(text_[id].bytes, t.data(), n);
  }
  (void)cut;
  for (int b = 0; b < 256; b++) {
    const int32_t id = c.byte_ids[size_t(b)];
    if (id < 0 || uint32_t(id) >= vocab)
      throw invalid_argument("kernel path: byte " + std::to_string(b) + " has no base token in the vocabulary");
    state_->byte_ids[b] = id;
  }
  state_->n_stop = static_cast<uint32_t>(c.stop_ids.size());
  for (size_t i = 0; i < 16; i++) state_->stop_ids[i] = i < c.stop_ids.size() ? c.stop_ids[i] : -1;
  state_->vocab = vocab;
}

// The kernel pool: one reserved KV cache per session of the kernel path.
void KernelDoor::reserve_sessions(const KernelDoorConfig& c) {
  const int positions = std::min<int>(c.kv_positions, int(progs_.layout().shape.max_ctx));
  pool_.clear();
  for (uint32_t k = 0; k < QK_KD_SESSIONS; k++) {
    std::unique_ptr<KvCache> kv = make_kv_(positions);
    auto* b = dynamic_cast<BpfKvCache*>(kv.get());
    if (!b) throw Error("kernel path: the backend's KV cache is not a BPF one");
    qk_kd_session& s = sessions_[k];
    std::memset(&s, 0, sizeof s);
    s.kv_slot = b->slot();
    s.kv_capacity = static_cast<uint32_t>(positions);
    s.owner_uid = c.owner_uid;
    s.pending_token = -1;
    std::memset(&results_[k], 0, sizeof(qk_result_slot));
    pool_.push_back(std::move(kv));
  }
}

void KernelDoor::enable(const KernelDoorConfig& c) {
  if (enabled()) return;
  {
    EngineOwner::Hold own = owner_.hold();  // nothing of an earlier life runs
    fill_tables(c);
    reserve_sessions(c);
    at(state_->pending).store(0);
  }
  if (!c.pin_dir.empty()) pin(c.pin_dir);
  at(state_->enabled).store(1);
}

void KernelDoor::disable() {
  if (!state_) return;
  at(state_->enabled).store(0);  // the doorbell refuses from here on
  unpin();
  EngineOwner::Hold own = owner_.hold();  // a running kernel-started generation ends first
}

void KernelDoor::pin(const std::string& dir) {
  std::vector<MapPin> maps;
  for (const std::string& name : pinned_maps()) maps.push_back({name, progs_.map_fd(name.c_str())});
  pin_maps(dir, maps, "kernel path");
  pinned_dir_ = dir;
}

void KernelDoor::unpin() {
  if (pinned_dir_.empty()) return;
  unpin_maps(pinned_dir_, pinned_maps());
  pinned_dir_.clear();
}

std::vector<KernelSessionInfo> KernelDoor::sessions() const {
  std::vector<KernelSessionInfo> out;
  if (!sessions_) return out;
  for (uint32_t k = 0; k < QK_KD_SESSIONS; k++) {
    const qk_kd_session& s = sessions_[k];
    if (!at(const_cast<uint32_t&>(s.state)).load()) continue;
    KernelSessionInfo i;
    i.id.assign(s.session, strnlen(s.session, QK_SESSION_BYTES));
    i.owner_uid = s.owner_uid;
    i.positions = at(const_cast<uint32_t&>(s.positions)).load();
    i.capacity = s.kv_capacity;
    i.generations = s.generations;
    i.tokens = s.tokens;
    i.request_id = s.request_id;
    i.running = at(const_cast<uint32_t&>(s.running)).load() != 0;
    if (k < pool_.size()) i.kv_bytes = pool_[k]->bytes();
    out.push_back(std::move(i));
  }
  return out;
}

KernelDoorCounters KernelDoor::counters() const {
  KernelDoorCounters c;
  if (!state_) return c;
  auto get = [](const uint64_t& v) { return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(v)).load(); };
  c.rung = get(state_->rung);
  c.started = get(state_->started);
  c.served = get(state_->served);
  c.busy = get(state_->busy);
  c.shed = get(state_->shed);
  c.refused = get(state_->refused);
  c.tokens = get(state_->tokens);
  c.yields = get(state_->yields);
  c.pending = at(state_->pending).load();
  c.daemon_waits = owner_.waits();
  return c;
}

}  // namespace qwen3::engine
