#include "engine/bpf_kv_cache.h"

#include <bpf/bpf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/error.h"
#include "op_args.h"

namespace qwen3::engine {

KvSlots::KvSlots(int outer_fd, const qn_shape& shape)
    : outer_fd_(dup(outer_fd)),
      value_size_(shape.kv_entry_bytes),
      n_layers_(shape.n_layers),
      n_kv_heads_(shape.n_kv_heads),
      used_(QN_MAX_SESSIONS, false) {
  if (outer_fd_ < 0) throw Error(std::string("cannot dup the KV outer map fd: ") + strerror(errno));
}

KvSlots::~KvSlots() { close(outer_fd_); }

uint32_t KvSlots::acquire() {
  std::lock_guard lock(mu_);
  for (uint32_t i = 0; i < used_.size(); i++) {
    if (!used_[i]) {
      used_[i] = true;
      return i;
    }
  }
  throw resource_exhausted("all " + std::to_string(QN_MAX_SESSIONS) + " KV cache slots are in use");
}

void KvSlots::release(uint32_t slot) {
  std::lock_guard lock(mu_);
  if (slot < used_.size()) used_[slot] = false;
}

uint64_t KvSlots::entries(int positions) const {
  return qn_kv_entries(n_layers_, n_kv_heads_, static_cast<uint32_t>(std::max(positions, 0)));
}

int KvSlots::live() const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (bool u : used_) n += u;
  return n;
}

BpfKvCache::BpfKvCache(std::shared_ptr<KvSlots> slots, int max_context)
    : slots_(std::move(slots)), max_context_(max_context) {
  if (max_context <= 0) throw invalid_argument("KV cache max_context must be positive");
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_INNER_MAP);
  const uint64_t entries = slots_->entries(max_context);
  if (entries > UINT32_MAX)
    throw resource_exhausted("a KV cache of " + std::to_string(max_context) +
                             " positions needs more map entries than a BPF array holds");
  fd_ = bpf_map_create(BPF_MAP_TYPE_ARRAY, "qwen3_kv", 4, slots_->value_size(), static_cast<uint32_t>(entries),
                       &opts);
  if (fd_ < 0)
    throw resource_exhausted("cannot create a KV cache map for " + std::to_string(max_context) +
                             " positions (" + std::to_string(bytes() >> 20) + " MiB): " + strerror(errno));
  try {
    slot_ = slots_->acquire();
  } catch (...) {
    close(fd_);
    throw;
  }
  if (bpf_map_update_elem(slots_->outer_fd(), &slot_, &fd_, BPF_ANY) != 0) {
    int e = errno;
    slots_->release(slot_);
    close(fd_);
    throw Error(std::string("cannot register the KV cache map: ") + strerror(e));
  }
}

BpfKvCache::~BpfKvCache() {
  bpf_map_delete_elem(slots_->outer_fd(), &slot_);
  slots_->release(slot_);
  close(fd_);
}

void BpfKvCache::truncate(int n) {
  if (n < 0 || n > positions_) throw invalid_argument("KV truncate beyond the cached positions");
  positions_ = n;  // entries past n are overwritten when those positions are fed again
}

}  // namespace qwen3::engine
