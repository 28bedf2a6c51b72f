// One conversation's state in the daemon: its KV cache (kernel BPF maps for
// the bpf backend) and the tokens it stands for. Sessions are the only owners
// of KV memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend.h"

namespace qwen3 {

using Clock = std::chrono::system_clock;

struct Session {
  std::string id;
  bool ephemeral = false;            // one request only, never listed
  std::unique_ptr<KvCache> kv;
  // Tokens known to the session: the first kv->positions() of them are cached;
  // at most one more (the last generated token, never fed) may follow.
  std::vector<int32_t> history;
  size_t kv_bytes = 0;               // what the budget counts: the larger of kv->bytes() and the full-size estimate
  Clock::time_point created;
  Clock::time_point last_used;
  bool busy = false;                 // guarded by the manager's mutex
  bool removed = false;              // deleted while busy: freed when the request ends
  uint32_t owner_uid = 0;            // the peer uid that created it (0: root / in-process)
  // The state as of the end of the last request on it (what a restart restores):
  // committed when a lease ends, guarded by the manager's mutex.
  std::vector<int32_t> committed_history;
  int committed_positions = 0;
  bool restoring = false;            // its KV is being recomputed: a lease end commits nothing
};

// `s` made safe to quote in an error message: bytes outside printable ASCII
// (NUL, control, non-ASCII) as \xNN, a backslash as \\, cut after about
// `max` characters of that (the length of the whole is said, the rest not shown).
std::string printable(std::string_view s, size_t max = 64);

// How many leading KV positions a request for `tokens` can reuse: the common
// prefix of the session's history and the tokens, limited to what is cached,
// and leaving at least one token to feed (the last position's logits are not
// stored, so it must be computed again).
int reusable_prefix(std::span<const int32_t> history, int cached_positions,
                    std::span<const int32_t> tokens);

}  // namespace qwen3
