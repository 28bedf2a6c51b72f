// Whether a model's weights and KV budget fit the memory the engine may use,
// checked before the weight maps exist, so a model that cannot fit is refused
// with its figures instead of failing deep in map creation. BPF maps are
// charged to the memory cgroup (kernel >= 5.11), not to RLIMIT_MEMLOCK, so the
// limit is the host's available memory and the cgroup's room (docs/shapes.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qwen3::engine {

struct MemoryLimit {
  uint64_t bytes = 0;  // what the engine may still allocate
  std::string source;  // where the figure comes from, in words a user can check
};

// The smaller of MemAvailable less a safety margin (1/32 of MemTotal, at least
// 256 MiB) and the room under every memory cgroup limit of this process's
// cgroup and its ancestors (v1 memory.limit_in_bytes, v2 memory.max; room =
// limit - usage + inactive file pages, which the kernel reclaims first).
// `root` prefixes every path read ("" on a real host; a fake tree in tests).
MemoryLimit host_memory_limit(const std::string& root = "");

// What a model asks of that memory.
struct MemoryNeed {
  uint64_t weights = 0;    // the weights map or arena as created
  uint64_t buffers = 0;    // every other map (activations, logits, RoPE, ...)
  uint64_t kv_budget = 0;  // the sessions' KV caches at most
  std::string weights_what;  // "q24 weights, map path"
  std::string kv_what;       // where the KV budget comes from
  // What to change, each with its figure ("precision = q8: weights 4.1 GiB").
  std::vector<std::string> remedies;
};

// Throws qwen3::Error (resource_exhausted) naming every figure, the shortfall
// and the remedies when weights + buffers + KV budget exceed the limit.
void check_memory_fit(const MemoryNeed& need, const MemoryLimit& limit);

// "1.85 GiB" / "512.0 MiB": the figures of the messages above.
std::string format_bytes(uint64_t bytes);

}  // namespace qwen3::engine
