#include "verify/insn_ranges.h"

#include <algorithm>
#include <deque>

namespace qwen3::verify {
namespace {

constexpr int kWidenAfterVisits = 12;  // then growing bounds jump to "unknown"
constexpr uint8_t kBpfMemsx = 0x80;  // sign-extending load (newer than some uapi headers)

RegValue join(const RegValue& a, const RegValue& b) {
  if (a.kind != b.kind) return RegValue::unknown();
  if (a.kind == RegValue::scalar) return RegValue::range(std::min(a.lo, b.lo), std::max(a.hi, b.hi));
  if (a.kind == RegValue::any || a.off != b.off) return RegValue::unknown();
  return a;
}

// Merges `in` into `into`; true when `into` changed. After many visits a
// growing scalar is widened to unknown, so loops reach a fixed point.
bool merge(RegState& into, const RegState& in, bool widen) {
  if (!into.reached) {
    into = in;
    into.reached = true;
    return true;
  }
  bool changed = false;
  for (int i = 0; i < 11; ++i) {
    RegValue j = join(into.r[i], in.r[i]);
    if (widen && j.kind == RegValue::scalar && !(j == into.r[i])) j = RegValue::unknown();
    if (!(j == into.r[i])) {
      into.r[i] = j;
      changed = true;
    }
  }
  for (auto it = into.stack.begin(); it != into.stack.end();) {
    auto other = in.stack.find(it->first);
    RegValue j = other == in.stack.end() ? RegValue::unknown() : join(it->second, other->second);
    if (widen && j.kind == RegValue::scalar && !(j == it->second)) j = RegValue::unknown();
    if (j.kind == RegValue::any) {
      it = into.stack.erase(it);
      changed = true;
      continue;
    }
    if (!(j == it->second)) {
      it->second = j;
      changed = true;
    }
    ++it;
  }
  return changed;
}

RegValue truncate32(RegValue v) {
  if (v.kind != RegValue::scalar || v.hi > UINT32_MAX) return RegValue::range(0, UINT32_MAX);
  return v;
}

bool add_overflows(uint64_t a, uint64_t b) { return a > UINT64_MAX - b; }

// dst OP src for scalars; unknown where the bounds are not simple.
RegValue alu(uint8_t op, RegValue d, RegValue s) {
  if (d.kind != RegValue::scalar) d = RegValue::range(0, UINT64_MAX);
  if (s.kind != RegValue::scalar) s = RegValue::range(0, UINT64_MAX);
  const bool dc = d.lo == d.hi, sc = s.lo == s.hi;
  switch (op) {
    case BPF_MOV: return s;
    case BPF_ADD:
      if (add_overflows(d.hi, s.hi)) return RegValue::unknown();
      return RegValue::range(d.lo + s.lo, d.hi + s.hi);
    case BPF_SUB:
      if (dc && sc) return RegValue::constant(d.lo - s.lo);
      if (d.lo >= s.hi) return RegValue::range(d.lo - s.hi, d.hi - s.lo);
      return RegValue::unknown();
    case BPF_MUL:
      if (d.hi != 0 && s.hi > UINT64_MAX / d.hi) return RegValue::unknown();
      return RegValue::range(d.lo * s.lo, d.hi * s.hi);
    case BPF_DIV:
      if (s.lo == 0) return RegValue::range(0, d.hi);  // x / 0 is 0 in BPF
      return RegValue::range(d.lo / s.hi, d.hi / s.lo);
    case BPF_MOD:
      if (s.lo == 0) return RegValue::range(0, d.hi);  // x % 0 is x
      return RegValue::range(0, std::min(d.hi, s.hi - 1));
    case BPF_AND:
      if (dc && sc) return RegValue::constant(d.lo & s.lo);
      return RegValue::range(0, std::min(d.hi, s.hi));
    case BPF_OR:
    case BPF_XOR: {
      if (dc && sc) return RegValue::constant(op == BPF_OR ? (d.lo | s.lo) : (d.lo ^ s.lo));
      uint64_t m = d.hi | s.hi;
      for (int k = 1; k < 64; k <<= 1) m |= m >> k;  // every bit up to the highest set one
      return RegValue::range(0, m);
    }
    case BPF_RSH:
      if (!sc || s.lo >= 64) return RegValue::unknown();
      return RegValue::range(d.lo >> s.lo, d.hi >> s.lo);
    case BPF_LSH:
      if (!sc || s.lo >= 64 || (d.hi >> (63 - s.lo)) > 1 || (s.lo > 0 && (d.hi >> (64 - s.lo)) != 0))
        return RegValue::unknown();
      return RegValue::range(d.lo << s.lo, d.hi << s.lo);
    default:
      return RegValue::unknown();  // NEG, ARSH, END (byte swaps), signed division ...
  }
}

void step_alu(const bpf_insn& in, RegState& st) {
  const bool is64 = BPF_CLASS(in.code) == BPF_ALU64;
  const uint8_t op = BPF_OP(in.code);
  RegValue& d = st.r[in.dst_reg];
  RegValue s = BPF_SRC(in.code) == BPF_X ? st.r[in.src_reg]
                                         : RegValue::constant(is64 ? static_cast<uint64_t>(static_cast<int64_t>(in.imm))
                                                                   : static_cast<uint32_t>(in.imm));
  if ((BPF_SRC(in.code) == BPF_X && op == BPF_MOV && in.off != 0) ||  // movsx
      ((op == BPF_DIV || op == BPF_MOD) && in.off != 0)) {              // signed division
    d = RegValue::unknown();
    return;
  }
  if (is64 && op == BPF_MOV) {
    d = s;
    return;
  }
  if (is64 && d.kind == RegValue::stack_ptr && (op == BPF_ADD || op == BPF_SUB) && s.kind == RegValue::scalar &&
      s.lo == s.hi) {
    d.off += op == BPF_ADD ? static_cast<int64_t>(s.lo) : -static_cast<int64_t>(s.lo);
    return;
  }
  if (!is64) {  // 32-bit operations see the low halves
    s = truncate32(s);
    d = truncate32(d);
  }
  RegValue r = alu(op, d, s);
  d = is64 ? r : truncate32(r);
}

void forget_stack_from(RegState& st, int64_t off, int size) {
  for (auto it = st.stack.begin(); it != st.stack.end();)
    it = (it->first < off + size && off < it->first + 8) ? st.stack.erase(it) : std::next(it);
}

void step_memory(const bpf_insn& in, RegState& st) {
  const uint8_t cls = BPF_CLASS(in.code);
  const int size = BPF_SIZE(in.code) == BPF_B ? 1 : BPF_SIZE(in.code) == BPF_H ? 2 : BPF_SIZE(in.code) == BPF_W ? 4 : 8;
  if (cls == BPF_LDX) {
    const RegValue base = st.r[in.src_reg];
    RegValue v = size == 8 ? RegValue::unknown() : RegValue::range(0, (uint64_t{1} << (8 * size)) - 1);
    if (BPF_MODE(in.code) == kBpfMemsx) v = RegValue::unknown();
    if (size == 8 && base.kind == RegValue::stack_ptr && BPF_MODE(in.code) == BPF_MEM) {
      auto it = st.stack.find(base.off + in.off);
      if (it != st.stack.end()) v = it->second;
    }
    st.r[in.dst_reg] = v;
    return;
  }
  // ST / STX (and atomics, which may also write a register).
  const RegValue base = st.r[in.dst_reg];
  if (base.kind != RegValue::stack_ptr) {
    // Any other pointer may alias the stack (a stack address plus a variable offset, too).
    st.stack.clear();
  } else {
    const int64_t off = base.off + in.off;
    forget_stack_from(st, off, size);
    if (BPF_MODE(in.code) == BPF_MEM && size == 8)
      st.stack[off] = cls == BPF_ST ? RegValue::constant(static_cast<uint64_t>(static_cast<int64_t>(in.imm)))
                                    : st.r[in.src_reg];
  }
  if (BPF_MODE(in.code) == BPF_ATOMIC) {
    st.r[in.src_reg] = RegValue::unknown();
    st.r[0] = RegValue::unknown();
  }
}

// Narrows `v` for the edge where "v OP c" is `taken`; false when the edge is impossible.
bool refine(RegValue& v, uint8_t op, uint64_t c, bool taken) {
  if (v.kind != RegValue::scalar) return true;
  uint64_t lo = v.lo, hi = v.hi;
  bool empty = false;
  auto at_most = [&](uint64_t x) { hi = std::min(hi, x); };
  auto at_least = [&](uint64_t x) { lo = std::max(lo, x); };
  auto above = [&](uint64_t x) { x == UINT64_MAX ? void(empty = true) : at_least(x + 1); };
  auto below = [&](uint64_t x) { x == 0 ? void(empty = true) : at_most(x - 1); };
  switch (op) {
    case BPF_JGT: taken ? above(c) : at_most(c); break;
    case BPF_JGE: taken ? at_least(c) : below(c); break;
    case BPF_JLT: taken ? below(c) : at_least(c); break;
    case BPF_JLE: taken ? at_most(c) : above(c); break;
    case BPF_JEQ:
      if (taken) at_least(c), at_most(c);
      break;
    case BPF_JNE:
      if (!taken) at_least(c), at_most(c);
      break;
    default: break;
  }
  if (empty) return false;
  if (lo > hi) return false;
  v.lo = lo;
  v.hi = hi;
  return true;
}

// Signed comparisons of non-negative values against non-negative constants are unsigned ones.
uint8_t as_unsigned(uint8_t op) {
  switch (op) {
    case BPF_JSGT: return BPF_JGT;
    case BPF_JSGE: return BPF_JGE;
    case BPF_JSLT: return BPF_JLT;
    case BPF_JSLE: return BPF_JLE;
    default: return op;
  }
}

}  // namespace

uint64_t max_u32(const RegValue& v) {
  if (v.kind != RegValue::scalar || v.hi > UINT32_MAX) return UINT64_MAX;
  return v.hi;
}

std::vector<RegState> analyze_ranges(const std::vector<bpf_insn>& insns, size_t begin, size_t end) {
  std::vector<RegState> in(end - begin);
  std::vector<int> visits(end - begin, 0);
  std::deque<size_t> work;
  auto push = [&](size_t to, const RegState& st) {
    if (to < begin || to >= end) return;
    const size_t k = to - begin;
    if (merge(in[k], st, ++visits[k] > kWidenAfterVisits)) work.push_back(to);
  };
  RegState entry;
  entry.reached = true;
  entry.r[10] = {RegValue::stack_ptr, 0, 0, 0};
  push(begin, entry);
  while (!work.empty()) {
    const size_t i = work.front();
    work.pop_front();
    RegState st = in[i - begin];
    const bpf_insn& ins = insns[i];
    const uint8_t cls = BPF_CLASS(ins.code);
    if (is_ld_imm64(ins)) {
      const uint64_t hi = i + 1 < insns.size() ? static_cast<uint32_t>(insns[i + 1].imm) : 0;
      if (ins.src_reg == 0) st.r[ins.dst_reg] = RegValue::constant(static_cast<uint32_t>(ins.imm) | (hi << 32));
      else if (ins.src_reg == BPF_PSEUDO_FUNC) st.r[ins.dst_reg] = {RegValue::callback, 0, 0, static_cast<int64_t>(i) + ins.imm + 1};
      else st.r[ins.dst_reg] = RegValue::unknown();
      push(i + 2, st);
      continue;
    }
    if (cls == BPF_ALU || cls == BPF_ALU64) {
      step_alu(ins, st);
      push(i + 1, st);
      continue;
    }
    if (cls == BPF_LDX || cls == BPF_ST || cls == BPF_STX) {
      step_memory(ins, st);
      push(i + 1, st);
      continue;
    }
    if (cls != BPF_JMP && cls != BPF_JMP32) {  // legacy packet loads (LD_ABS/IND) write r0
      st.r[0] = RegValue::unknown();
      push(i + 1, st);
      continue;
    }
    const uint8_t op = BPF_OP(ins.code);
    if (op == BPF_EXIT) continue;
    if (op == BPF_CALL) {
      for (int r = 0; r <= 5; ++r) st.r[r] = RegValue::unknown();
      st.stack.clear();  // callees and helpers may write through stack pointers
      push(i + 1, st);
      continue;
    }
    if (op == BPF_JA) {
      push(i + 1 + (cls == BPF_JMP32 ? ins.imm : ins.off), st);
      continue;
    }
    const size_t target = i + 1 + ins.off;
    if (op == kBpfJcond) {  // may_goto
      push(target, st);
      push(i + 1, st);
      continue;
    }
    // Conditional jumps: narrow the compared register when the other side is a constant.
    RegValue other = BPF_SRC(ins.code) == BPF_X ? st.r[ins.src_reg]
                                                : RegValue::constant(cls == BPF_JMP32 ? static_cast<uint32_t>(ins.imm)
                                                                                      : static_cast<uint64_t>(static_cast<int64_t>(ins.imm)));
    RegState taken = st, fall = st;
    bool taken_ok = true, fall_ok = true;
    const RegValue& dst = st.r[ins.dst_reg];
    const bool comparable = other.kind == RegValue::scalar && other.lo == other.hi && dst.kind == RegValue::scalar &&
                            (cls == BPF_JMP || dst.hi <= UINT32_MAX);
    uint8_t uop = op;
    if (uop == BPF_JSGT || uop == BPF_JSGE || uop == BPF_JSLT || uop == BPF_JSLE)
      uop = (dst.hi <= static_cast<uint64_t>(INT64_MAX) && other.lo <= static_cast<uint64_t>(INT32_MAX)) ? as_unsigned(uop) : 0xff;
    if (comparable && uop != 0xff) {
      taken_ok = refine(taken.r[ins.dst_reg], uop, other.lo, true);
      fall_ok = refine(fall.r[ins.dst_reg], uop, other.lo, false);
    }
    if (taken_ok) push(target, taken);
    if (fall_ok) push(i + 1, fall);
  }
  return in;
}

}  // namespace qwen3::verify
