// A session's KV blocks as bytes and back, for session export/import
// (session_transfer.h). Only the bpf backend's caches (engine/bpf_kv_cache.h:
// one BPF array map, entries block-major, bpf_ops/layout.h) can be read and
// written; a cache of n positions is its first qn_kv_entries(n) entries, copied
// verbatim, so an imported cache is bit-identical to the exported one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/backend.h"
#include "service/session_file.h"

namespace qwen3 {

// The layout of `kv`'s entries holding `positions` positions; nullopt when the
// cache is not a BPF map (the reference backend).
std::optional<SessionFileKv> kv_layout(KvCache& kv, const ModelConfig& config, int positions);
// The first layout.entries entries of `kv`. Throws qwen3::Error on a failed map read.
std::string read_kv(KvCache& kv, const SessionFileKv& layout);
// Writes `data` (layout.entries entries) into `kv`, which then holds `positions`
// positions. The caller has checked the layout against kv_layout(kv, ...).
void write_kv(KvCache& kv, const SessionFileKv& layout, std::string_view data, int positions);

}  // namespace qwen3
