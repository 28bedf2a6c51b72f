// The session export format: one session (its tokens, context size, owner
// and optionally its KV blocks) as bytes another daemon can import.
//
//   "Q3SESSN\n"                 8 bytes, magic
//   version                     u32 little-endian (1)
//   header length H             u32 little-endian
//   header                      H bytes of JSON (below)
//   KV length K                 u64 little-endian (0: no KV)
//   KV                          K bytes: the cache's map entries 0..entries-1, entry_bytes each
//   SHA-256                     32 bytes over everything before it
//
// The header names the model (model_identity.h: SHA-256 of config.json and
// the weights), the backend, the precision and the KV layout (element bits,
// entry bytes, positions per entry, entries), and the session. Reading checks
// in this order: magic, version, lengths (a truncated file says how many bytes
// are missing), checksum (an altered file), then the header's fields; every
// refusal is an invalid_argument naming what is wrong. Whether the model and
// layout fit the importing daemon is decided by session_transfer.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qwen3 {

inline constexpr uint32_t kSessionFileVersion = 1;

struct SessionFileKv {
  int bits = 0;             // K/V element width: 8 or 16
  uint32_t entry_bytes = 0; // bytes of one map entry
  int block = 0;            // positions per entry
  uint64_t entries = 0;     // entries held (those covering `positions`)
};

struct SessionFile {
  std::string model_sha256;
  std::string model_name;   // informative: the exporting daemon's model id
  std::string backend;      // "bpf" | "reference"
  std::string precision;    // "q8" | "q24" | "f32"
  int layers = 0, kv_heads = 0, head_dim = 0, vocab_size = 0;
  std::string daemon_version;
  int64_t created_unix_ms = 0;
  // The session.
  std::string id;
  uint32_t owner_uid = 0;
  int max_context = 0;
  int positions = 0;                // KV positions the tokens stand for
  std::vector<int32_t> history;     // positions tokens, and at most one more (generated, not fed)
  bool has_kv = false;
  SessionFileKv kv;
  std::string kv_data;              // kv.entries * kv.entry_bytes bytes when has_kv
};

std::string encode_session_file(const SessionFile& f);
// Throws invalid_argument naming what is wrong (truncated, altered, not an
// export, another version, an inconsistent header).
SessionFile decode_session_file(std::string_view bytes);

}  // namespace qwen3
