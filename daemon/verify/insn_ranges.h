// A small forward range analysis over one BPF function's instructions: the
// unsigned bounds of scalar registers (constants, loads of 1/2/4 bytes, masks,
// shifts, comparisons against constants), stack pointers and callback
// addresses, spilled to and reloaded from the stack. The loop budget
// (loop_budget.h) uses it to bound the counts handed to bpf_loop and
// bpf_iter_num_new. Anything it does not follow is "unknown" (any value), so
// its bounds are never tighter than the truth.
#pragma once

#include <linux/bpf.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace qwen3::verify {

inline constexpr uint8_t kBpfJcond = 0xe0;  // may_goto (newer than the uapi headers of some distributions)

inline bool is_ld_imm64(const bpf_insn& in) { return in.code == (BPF_LD | BPF_IMM | BPF_DW); }

struct RegValue {
  enum Kind : uint8_t { any, scalar, stack_ptr, callback } kind = any;
  uint64_t lo = 0, hi = UINT64_MAX;  // scalar: unsigned bounds
  int64_t off = 0;                   // stack_ptr: offset from r10; callback: instruction index
  static RegValue unknown() { return {}; }
  static RegValue constant(uint64_t v) { return {scalar, v, v, 0}; }
  static RegValue range(uint64_t lo, uint64_t hi) { return {scalar, lo, hi, 0}; }
  bool operator==(const RegValue&) const = default;
};

struct RegState {
  bool reached = false;
  RegValue r[11];
  std::map<int64_t, RegValue> stack;  // 8-byte slots by offset from r10
};

// The register state before each instruction of [begin, end) (reached=false
// for instructions no path reaches, and for the second half of ld_imm64).
std::vector<RegState> analyze_ranges(const std::vector<bpf_insn>& insns, size_t begin, size_t end);

// The largest value `v` can have, read as an unsigned 32-bit argument (UINT64_MAX when unknown).
uint64_t max_u32(const RegValue& v);

}  // namespace qwen3::verify
