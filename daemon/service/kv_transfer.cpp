#include "service/kv_transfer.h"

#include <bpf/bpf.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "engine/bpf_kv_cache.h"
#include "layout.h"

namespace qwen3 {

namespace {

engine::BpfKvCache* bpf_cache(KvCache& kv) { return dynamic_cast<engine::BpfKvCache*>(&kv); }

uint32_t value_size_of(int fd) {
  bpf_map_info info{};
  uint32_t len = sizeof info;
  if (bpf_map_get_info_by_fd(fd, &info, &len) != 0)
    throw Error(std::string("cannot read the KV map's description: ") + std::strerror(errno));
  return info.value_size;
}

}  // namespace

std::optional<SessionFileKv> kv_layout(KvCache& kv, const ModelConfig& config, int positions) {
  engine::BpfKvCache* c = bpf_cache(kv);
  if (!c) return std::nullopt;
  SessionFileKv l;
  l.entry_bytes = value_size_of(c->map_fd());
  l.block = QN_KV_BLOCK;
  const uint32_t rec = l.entry_bytes / QN_KV_BLOCK;
  const uint32_t hd = static_cast<uint32_t>(config.head_dim);
  l.bits = rec == qn_kv_rec_bytes(hd, 1) ? 8 : rec == qn_kv_rec_bytes(hd, 2) ? 16 : 0;
  if (l.bits == 0)
    throw Error("the KV map's entries of " + std::to_string(l.entry_bytes) + " bytes match no K/V layout of head_dim " +
                std::to_string(hd));
  l.entries = qn_kv_entries(static_cast<uint32_t>(config.num_hidden_layers),
                            static_cast<uint32_t>(config.num_key_value_heads), static_cast<uint32_t>(positions));
  return l;
}

std::string read_kv(KvCache& kv, const SessionFileKv& l) {
  engine::BpfKvCache* c = bpf_cache(kv);
  if (!c) throw Error("this KV cache is not a BPF map; its blocks cannot be exported");
  std::string out(l.entries * l.entry_bytes, '\0');
  for (uint32_t key = 0; key < l.entries; ++key)
    if (bpf_map_lookup_elem(c->map_fd(), &key, out.data() + static_cast<size_t>(key) * l.entry_bytes) != 0)
      throw Error("cannot read KV entry " + std::to_string(key) + ": " + std::strerror(errno));
  return out;
}

void write_kv(KvCache& kv, const SessionFileKv& l, std::string_view data, int positions) {
  engine::BpfKvCache* c = bpf_cache(kv);
  if (!c) throw Error("this KV cache is not a BPF map; KV blocks cannot be imported into it");
  if (data.size() != l.entries * l.entry_bytes) throw invalid_argument("KV data of the wrong size");
  if (positions > c->max_context()) throw invalid_argument("more KV positions than the cache holds");
  for (uint32_t key = 0; key < l.entries; ++key)
    if (bpf_map_update_elem(c->map_fd(), &key, data.data() + static_cast<size_t>(key) * l.entry_bytes, BPF_EXIST) != 0)
      throw Error("cannot write KV entry " + std::to_string(key) + ": " + std::strerror(errno));
  c->set_positions(positions);
}

}  // namespace qwen3
