// What a loaded object may cost the host, checked in the loader child before
// anything runs: the kernel memory its maps really allocate, the values a
// fixture file may write into device maps, and the loop budget of a test-run.
#pragma once

#include <bpf/libbpf.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "verify/loop_budget.h"

namespace qwen3::verify {

// Bytes the kernel allocates for a map of this shape (rounded up, worst case:
// preallocated elements, hash buckets, per-CPU copies, bloom filter bit arrays
// rounded to a power of two).
uint64_t kernel_map_bytes(enum bpf_map_type type, uint32_t key_size, uint32_t value_size, uint32_t max_entries,
                          uint32_t flags, uint64_t map_extra, uint32_t cpus);

// "" or why the object's maps are over `max_bytes` in total.
std::string check_map_memory(const struct bpf_object* obj, size_t max_bytes);

// "" or why `value` may not be written into map `m` before the runs: device
// maps may name only the test's own loopback interface (ifindex 1) and no
// program fds, so a fixture file cannot probe the host's interfaces.
std::string check_device_map_value(const struct bpf_map* m, const std::string& value);

struct LoopVerdict {
  LoopBound bound;
  std::string refusal;  // "" when within the budget
};
LoopVerdict check_loop_budget(const struct bpf_object* obj, const struct bpf_program* prog, uint64_t verified_insns,
                              uint64_t max_iterations, uint64_t max_work,
                              const std::function<std::string(int32_t)>& kfunc_name);

}  // namespace qwen3::verify
