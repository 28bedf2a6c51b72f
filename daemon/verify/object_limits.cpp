#include "verify/object_limits.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace qwen3::verify {
namespace {

constexpr uint64_t kMapOverhead = 1024;    // struct bpf_map and friends
constexpr uint64_t kHtabElemHeader = 48;   // struct htab_elem before the key
constexpr uint64_t kHashBucketBytes = 16;  // struct bucket
constexpr uint64_t kLpmNodeHeader = 48;    // struct lpm_trie_node before the data
constexpr uint64_t kDevmapEntryBytes = 128;
constexpr uint32_t kLoopbackIfindex = 1;   // the only interface of the loader's own network namespace

uint64_t round8(uint64_t v) { return (v + 7) / 8 * 8; }
uint64_t pow2_at_least(uint64_t v) {
  uint64_t p = 1;
  while (p < v && p < (uint64_t{1} << 62)) p <<= 1;
  return p;
}
uint64_t mul(uint64_t a, uint64_t b) { return (a != 0 && b > UINT64_MAX / a) ? UINT64_MAX : a * b; }
uint64_t add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// kernel/bpf/bloom_filter.c: max_entries * hashes * 7 / 5 bits (u32 arithmetic), rounded up to a power of two.
uint64_t bloom_bytes(uint32_t max_entries, uint64_t map_extra) {
  uint32_t hashes = static_cast<uint32_t>(map_extra & 0xf);
  if (hashes == 0) hashes = 5;
  const uint64_t product = uint64_t{max_entries} * hashes;
  uint64_t bits;
  if (product > UINT32_MAX || (product / 5) * 7 > (uint64_t{1} << 31)) bits = uint64_t{1} << 32;
  else bits = std::max<uint64_t>(64, pow2_at_least((product / 5) * 7));
  return round8(bits / 8);
}

}  // namespace

uint64_t kernel_map_bytes(enum bpf_map_type type, uint32_t key_size, uint32_t value_size, uint32_t max_entries,
                          uint32_t flags, uint64_t map_extra, uint32_t cpus) {
  const uint64_t n = max_entries, k = round8(key_size), v = round8(value_size), c = std::max<uint32_t>(1, cpus);
  uint64_t bytes = 0;
  switch (type) {
    case BPF_MAP_TYPE_ARRAY: bytes = add(mul(n, v), 4096); break;  // + a page when mmapable
    case BPF_MAP_TYPE_PERCPU_ARRAY: bytes = mul(n, add(8, mul(v, c))); break;
    case BPF_MAP_TYPE_HASH:
    case BPF_MAP_TYPE_LRU_HASH: {
      // Preallocated (unless BPF_F_NO_PREALLOC: the same bytes once full), plus one spare element per CPU.
      const uint64_t elems = add(n, c);
      bytes = add(mul(elems, kHtabElemHeader + k + v), mul(pow2_at_least(n), kHashBucketBytes));
      break;
    }
    case BPF_MAP_TYPE_PERCPU_HASH:
    case BPF_MAP_TYPE_LRU_PERCPU_HASH: {
      const uint64_t elems = add(n, c);
      bytes = add(mul(elems, add(kHtabElemHeader + k + 8, mul(v, c))), mul(pow2_at_least(n), kHashBucketBytes));
      break;
    }
    case BPF_MAP_TYPE_LPM_TRIE: bytes = mul(mul(2, n), kLpmNodeHeader + k + v); break;  // leaves + inner nodes
    case BPF_MAP_TYPE_BLOOM_FILTER: bytes = bloom_bytes(max_entries, map_extra); break;
    case BPF_MAP_TYPE_QUEUE:
    case BPF_MAP_TYPE_STACK: bytes = mul(n + 1, value_size); break;
    case BPF_MAP_TYPE_RINGBUF: bytes = add(n, 2 * 4096); break;
    case BPF_MAP_TYPE_DEVMAP:
    case BPF_MAP_TYPE_DEVMAP_HASH: bytes = add(mul(pow2_at_least(n), 8), mul(n, kDevmapEntryBytes)); break;
    default: bytes = mul(n, 8 + k + v); break;  // arrays of pointers (prog, perf event, cpu, xsk maps) and the rest
  }
  (void)flags;
  return add(bytes, kMapOverhead);
}

std::string check_map_memory(const struct bpf_object* obj, size_t max_bytes) {
  const uint32_t cpus = static_cast<uint32_t>(std::max(1, libbpf_num_possible_cpus()));
  uint64_t total = 0;
  std::string largest;
  uint64_t largest_bytes = 0;
  const struct bpf_map* m;
  bpf_object__for_each_map(m, obj) {
    const uint64_t b = kernel_map_bytes(bpf_map__type(m), bpf_map__key_size(m), bpf_map__value_size(m),
                                        bpf_map__max_entries(m), bpf_map__map_flags(m), bpf_map__map_extra(m), cpus);
    total = add(total, b);
    if (b > largest_bytes) largest_bytes = b, largest = bpf_map__name(m);
  }
  if (total <= max_bytes) return "";
  return "the program's maps need " + std::to_string(total) + " bytes of kernel memory (map '" + largest + "' " +
         std::to_string(largest_bytes) + "); the limit is " + std::to_string(max_bytes) + " bytes";
}

std::string check_device_map_value(const struct bpf_map* m, const std::string& value) {
  const enum bpf_map_type t = bpf_map__type(m);
  const std::string name = bpf_map__name(m);
  auto u32_at = [&](size_t off) {
    uint32_t x = 0;
    if (value.size() >= off + 4) std::memcpy(&x, value.data() + off, 4);
    return x;
  };
  if (t == BPF_MAP_TYPE_DEVMAP || t == BPF_MAP_TYPE_DEVMAP_HASH) {
    if (u32_at(0) != kLoopbackIfindex)
      return "initial map contents for '" + name + "': ifindex " + std::to_string(u32_at(0)) +
             " is not an interface of the test; device maps may only name the test's loopback interface (ifindex 1)";
    if (u32_at(4) != 0)
      return "initial map contents for '" + name + "': a device map value may not name a program (bytes 4-7 must be 0)";
  } else if (t == BPF_MAP_TYPE_CPUMAP) {
    if (u32_at(4) != 0)
      return "initial map contents for '" + name + "': a cpumap value may not name a program (bytes 4-7 must be 0)";
  } else if (t == BPF_MAP_TYPE_XSKMAP) {
    return "initial map contents for '" + name + "': xskmap values are sockets and cannot be given";
  }
  return "";
}

LoopVerdict check_loop_budget(const struct bpf_object* obj, const struct bpf_program* prog, uint64_t verified_insns,
                              uint64_t max_iterations, uint64_t max_work,
                              const std::function<std::string(int32_t)>& kfunc_name) {
  LoopBudgetInput in;
  const struct bpf_insn* insns = bpf_program__insns(prog);
  in.insns.assign(insns, insns + bpf_program__insn_cnt(prog));
  in.verified_insns = verified_insns;
  in.kfunc_name = kfunc_name;
  const struct bpf_map* m;
  bpf_object__for_each_map(m, obj) in.max_map_entries = std::max<uint64_t>(in.max_map_entries, bpf_map__max_entries(m));
  LoopVerdict v;
  v.bound = bound_loops(in);
  auto shown = [](uint64_t x) { return x == UINT64_MAX ? std::string("an unbounded number of") : std::to_string(x); };
  const std::string advice =
      "; bound the counts by constants (e.g. n & 0xff, or if (n > 64) n = 64) and do not nest bpf_loop/bpf_for with "
      "large counts";
  if (v.bound.iterations > max_iterations)
    v.refusal = "loop budget: " + v.bound.path + ": up to " + shown(v.bound.iterations) +
                " loop iterations in one test run, over the budget of " + std::to_string(max_iterations) +
                " (max_loop_iterations)" + advice;
  else if (v.bound.work > max_work)
    v.refusal = "loop budget: " + (v.bound.path.empty() ? std::string("the program's loops") : v.bound.path) +
                ": up to " + shown(v.bound.work) + " instructions in one test run, over the budget of " +
                std::to_string(max_work) + " (max_run_work)" + advice;
  return v;
}

}  // namespace qwen3::verify
