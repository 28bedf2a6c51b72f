#include "verify/loop_budget.h"

#include <algorithm>
#include <map>
#include <set>

#include "verify/insn_ranges.h"

namespace qwen3::verify {
namespace {

constexpr uint64_t kCallbackWork = 16;    // the helper's own work per callback run
// Larger functions skip the range analysis (its states cost memory per
// instruction): their counts are unknown, i.e. the kernel's cap.
constexpr int kMaxRangeAnalysisInsns = 65536;

uint64_t smul(uint64_t a, uint64_t b) { return (a != 0 && b > UINT64_MAX / a) ? UINT64_MAX : a * b; }
uint64_t sadd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

bool is_call(const bpf_insn& in) { return in.code == (BPF_JMP | BPF_CALL); }
bool is_helper(const bpf_insn& in, int id) { return is_call(in) && in.src_reg == 0 && in.imm == id; }
bool is_may_goto(const bpf_insn& in) { return in.code == (BPF_JMP | kBpfJcond); }

struct Summary {
  uint64_t iterations = 0, work = 0;
  uint64_t top = 0;  // iterations behind `insn`
  int insn = -1;
  std::string path;
};

struct Loop {
  int header;
  std::vector<int> nodes;  // local indices
};

// Successors of each instruction of [begin, end), as local indices.
std::vector<std::vector<int>> successors(const std::vector<bpf_insn>& insns, size_t begin, size_t end) {
  const int n = static_cast<int>(end - begin);
  std::vector<std::vector<int>> succ(n);
  for (int k = 0; k < n; ++k) {
    const bpf_insn& in = insns[begin + k];
    auto add = [&](long to) {
      if (to >= 0 && to < n) succ[k].push_back(static_cast<int>(to));
    };
    const uint8_t cls = BPF_CLASS(in.code);
    if (is_ld_imm64(in)) {
      add(k + 2);
      ++k;
      continue;
    }
    if (cls != BPF_JMP && cls != BPF_JMP32) {
      add(k + 1);
      continue;
    }
    const uint8_t op = BPF_OP(in.code);
    if (op == BPF_EXIT) continue;
    if (op == BPF_CALL) add(k + 1);
    else if (op == BPF_JA) add(k + 1 + (cls == BPF_JMP32 ? in.imm : in.off));
    else {
      add(k + 1 + in.off);
      add(k + 1);
    }
  }
  return succ;
}

// Strongly connected components of the graph restricted to `member` nodes,
// ignoring edges into `blocked` ones (iterative Tarjan).
std::vector<std::vector<int>> components(const std::vector<std::vector<int>>& succ, const std::vector<int>& nodes,
                                         const std::vector<char>& member, const std::vector<char>& blocked) {
  const size_t n = succ.size();
  std::vector<int> index(n, -1), low(n, 0), stack;
  std::vector<char> on(n, 0);
  std::vector<std::vector<int>> out;
  int counter = 0;
  struct Frame {
    int v;
    size_t e;
  };
  for (int s : nodes) {
    if (index[s] >= 0) continue;
    std::vector<Frame> calls{{s, 0}};
    index[s] = low[s] = counter++;
    stack.push_back(s);
    on[s] = 1;
    while (!calls.empty()) {
      const int v = calls.back().v;
      if (calls.back().e < succ[v].size()) {
        const int w = succ[v][calls.back().e++];
        if (!member[w] || blocked[w]) continue;
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on[w] = 1;
          calls.push_back({w, 0});
        } else if (on[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        std::vector<int> comp;
        int w;
        do {
          w = stack.back();
          stack.pop_back();
          on[w] = 0;
          comp.push_back(w);
        } while (w != v);
        out.push_back(std::move(comp));
      }
      calls.pop_back();
      if (!calls.empty()) low[calls.back().v] = std::min(low[calls.back().v], low[v]);
    }
  }
  return out;
}

// The loop nesting forest, outer loops before the loops inside them.
void find_loops(const std::vector<std::vector<int>>& succ, const std::vector<int>& nodes, std::vector<char>& blocked,
                std::vector<Loop>& out) {
  std::vector<char> member(succ.size(), 0);
  for (int v : nodes) member[v] = 1;
  for (auto& comp : components(succ, nodes, member, blocked)) {
    const int v0 = comp.front();
    bool cyclic = comp.size() > 1 || (!blocked[v0] && std::count(succ[v0].begin(), succ[v0].end(), v0) > 0);
    if (!cyclic) continue;
    const int header = *std::min_element(comp.begin(), comp.end());
    out.push_back({header, comp});
    blocked[header] = 1;  // the inner loops are what remains without the back edges into the header
    find_loops(succ, comp, blocked, out);
    blocked[header] = 0;
  }
}

class Analyzer {
 public:
  explicit Analyzer(const LoopBudgetInput& in) : in_(in) {
    starts_.insert(0);
    for (size_t i = 0; i < in.insns.size(); ++i) {
      const bpf_insn& x = in.insns[i];
      if (is_call(x) && x.src_reg == BPF_PSEUDO_CALL) starts_.insert(i + 1 + x.imm);
      if (is_ld_imm64(x) && x.src_reg == BPF_PSEUDO_FUNC) {
        starts_.insert(i + 1 + x.imm);
        callbacks_.insert(i + 1 + x.imm);
      }
      if (is_helper(x, BPF_FUNC_tail_call)) tail_calls_ = true;
    }
  }
  bool tail_calls() const { return tail_calls_; }
  const std::set<size_t>& callbacks() const { return callbacks_; }
  Summary function(size_t start);

 private:
  size_t end_of(size_t start) const {
    auto it = starts_.upper_bound(start);
    return it == starts_.end() ? in_.insns.size() : std::min(*it, in_.insns.size());
  }
  Summary any_callback() {
    Summary worst;
    for (size_t cb : callbacks_) {
      Summary s = function(cb);
      if (s.iterations >= worst.iterations) worst.iterations = s.iterations, worst.path = s.path;
      worst.work = std::max(worst.work, s.work);
    }
    return worst;
  }
  Summary callee(const RegValue& v) {
    return v.kind == RegValue::callback && starts_.count(static_cast<size_t>(v.off)) ? function(static_cast<size_t>(v.off))
                                                                                     : any_callback();
  }
  std::string kfunc(const bpf_insn& x) const {
    return is_call(x) && x.src_reg == BPF_PSEUDO_KFUNC_CALL && in_.kfunc_name ? in_.kfunc_name(x.imm) : "";
  }
  Summary analyze(size_t begin, size_t end);

  const LoopBudgetInput& in_;
  std::set<size_t> starts_, callbacks_, active_;
  std::map<size_t, Summary> done_;
  bool tail_calls_ = false;
};

Summary Analyzer::function(size_t start) {
  if (auto it = done_.find(start); it != done_.end()) return it->second;
  if (start >= in_.insns.size() || active_.count(start)) {  // recursion through callbacks: no bound
    Summary s;
    s.iterations = s.work = s.top = UINT64_MAX;
    s.path = "a callback that (indirectly) runs itself";
    return s;
  }
  active_.insert(start);
  Summary s = analyze(start, end_of(start));
  active_.erase(start);
  done_[start] = s;
  return s;
}

void note(Summary& s, uint64_t contribution, int insn, const std::string& what) {
  if (contribution > s.top || s.insn < 0) {
    s.top = contribution;
    s.insn = insn;
    s.path = what;
  }
}

// One pass over a function: its instructions' cost (calls weighted), whether it has loop
// constructs (may_goto, kfuncs, subprogram calls, bpf_loop, bpf_for_each_map_elem), and
// whether it jumps backwards (an ordinary loop).
struct PlainScan {
  uint64_t work = 0;
  bool constructs = false, back_edge = false;
};

template <typename Insns>
PlainScan scan_plain(const Insns& insns, size_t begin, size_t end) {
  PlainScan p;
  for (size_t k = begin; k < end; ++k) {
    const bpf_insn& x = insns[k];
    p.work = sadd(p.work, is_call(x) ? kCallWork : 1);
    if (is_may_goto(x) || (is_call(x) && (x.src_reg != 0 || x.imm == BPF_FUNC_loop || x.imm == BPF_FUNC_for_each_map_elem)))
      p.constructs = true;
    const uint8_t cls = BPF_CLASS(x.code);
    if ((cls == BPF_JMP || cls == BPF_JMP32) && BPF_OP(x.code) != BPF_CALL && BPF_OP(x.code) != BPF_EXIT &&
        (BPF_OP(x.code) == BPF_JA && cls == BPF_JMP32 ? x.imm : x.off) < 0)
      p.back_edge = true;
    if (is_ld_imm64(x)) ++k;
  }
  return p;
}

Summary Analyzer::analyze(size_t begin, size_t end) {
  const int n = static_cast<int>(end - begin);
  Summary s;
  const uint64_t regular_trips = std::max<uint64_t>(1, in_.verified_insns);
  // Plain functions (no loop constructs, no calls of subprograms) cost their instructions, or
  // the verifier's walk when they have ordinary loops.
  const PlainScan p = scan_plain(in_.insns, begin, end);
  if (!p.constructs) {
    s.work = p.back_edge ? sadd(p.work, smul(regular_trips, kCallWork)) : p.work;
    return s;
  }
  const bool ranges = n <= kMaxRangeAnalysisInsns;
  const std::vector<RegState> st = ranges ? analyze_ranges(in_.insns, begin, end) : std::vector<RegState>{};
  auto reached = [&](int k) { return !ranges || st[k].reached; };  // unreachable by the ranges: never runs
  auto reg = [&](int k, int r) { return ranges && st[k].reached ? st[k].r[r] : RegValue::unknown(); };
  // Iterators: the trip bound of each bpf_iter_num_new, by the iterator's stack slot.
  std::map<int64_t, uint64_t> iter_trips;
  std::map<int64_t, std::vector<int>> iter_news;
  for (int k = 0; k < n; ++k) {
    if (kfunc(in_.insns[begin + k]) != "bpf_iter_num_new") continue;
    const RegValue it = reg(k, 1), from = reg(k, 2), to = reg(k, 3);
    uint64_t trips = kKernelMaxLoops;
    if (from.kind == RegValue::scalar && to.kind == RegValue::scalar && from.hi <= INT32_MAX && to.hi <= INT32_MAX)
      trips = std::min(kKernelMaxLoops, to.hi > from.lo ? to.hi - from.lo : 0);
    const int64_t slot = it.kind == RegValue::stack_ptr ? it.off : INT64_MIN;
    iter_trips[slot] = std::max(iter_trips[slot], trips);
    iter_news[slot].push_back(k);
  }
  std::vector<int> all(n);
  for (int k = 0; k < n; ++k) all[k] = k;
  std::vector<char> blocked(n, 0);
  std::vector<Loop> loops;
  find_loops(successors(in_.insns, begin, end), all, blocked, loops);
  std::vector<uint64_t> mult(n, 1), mult_iter(n, 1);
  std::vector<char> in_regular(n, 0);
  std::vector<int> outermost(n, -1);
  for (const Loop& L : loops) {
    std::set<int> inside(L.nodes.begin(), L.nodes.end());
    uint64_t trips = 1;
    bool driven = false;
    std::set<int64_t> seen;
    for (int k : L.nodes) {
      const bpf_insn& x = in_.insns[begin + k];
      if (is_may_goto(x)) trips = smul(trips, kKernelMaxLoops), driven = true;
      if (kfunc(x) != "bpf_iter_num_next") continue;
      const RegValue it = reg(k, 1);
      const int64_t slot = it.kind == RegValue::stack_ptr ? it.off : INT64_MIN;
      bool created_inside = slot != INT64_MIN && iter_news.count(slot) &&
                            std::all_of(iter_news[slot].begin(), iter_news[slot].end(), [&](int c) { return inside.count(c); });
      if (created_inside || !seen.insert(slot).second) continue;
      trips = smul(trips, slot != INT64_MIN && iter_trips.count(slot) ? iter_trips[slot] : kKernelMaxLoops);
      driven = true;
    }
    const int h = L.header;
    const int top = outermost[h] >= 0 ? outermost[h] : h;
    if (driven) {
      const uint64_t runs = smul(mult[h], trips);
      s.iterations = sadd(s.iterations, runs);
      note(s, runs, static_cast<int>(begin) + top,
           "an open-coded iterator or may_goto loop (bpf_for, bpf_iter_num_*) of up to " + std::to_string(trips) + " iterations");
    } else {
      trips = regular_trips;
      if (!in_regular[h]) {
        bool calls = std::any_of(L.nodes.begin(), L.nodes.end(), [&](int k) { return is_call(in_.insns[begin + k]); });
        s.work = sadd(s.work, smul(mult_iter[h], smul(regular_trips, calls ? kCallWork : 1)));
      }
    }
    for (int k : L.nodes) {
      mult[k] = smul(mult[k], trips);
      if (driven) mult_iter[k] = smul(mult_iter[k], trips);
      else in_regular[k] = 1;
      if (outermost[k] < 0) outermost[k] = top;
    }
  }
  for (int k = 0; k < n; ++k) {
    const bpf_insn& x = in_.insns[begin + k];
    s.work = sadd(s.work, smul(mult_iter[k], is_call(x) ? kCallWork : 1));
    if (is_ld_imm64(x)) {
      ++k;
      continue;
    }
    if (!is_call(x) || !reached(k)) continue;
    const int at = static_cast<int>(begin) + (outermost[k] >= 0 ? outermost[k] : k);
    if (x.src_reg == BPF_PSEUDO_CALL) {
      Summary g = function(begin + k + 1 + x.imm);
      s.iterations = sadd(s.iterations, smul(mult[k], g.iterations));
      s.work = sadd(s.work, smul(mult[k], g.work));
      if (g.iterations > 0) note(s, smul(mult[k], g.iterations), at, "a function call; in it: " + g.path);
      continue;
    }
    uint64_t count = 0;
    Summary cb;
    std::string what;
    if (is_helper(x, BPF_FUNC_loop)) {
      count = std::min(kKernelMaxLoops, max_u32(reg(k, 1)));  // bpf_loop(nr_loops, callback_fn, ctx, flags)
      cb = callee(reg(k, 2));
      what = "bpf_loop";
    } else if (is_helper(x, BPF_FUNC_for_each_map_elem)) {
      count = in_.max_map_entries;
      cb = callee(reg(k, 2));
      what = "bpf_for_each_map_elem";
    } else {
      continue;
    }
    const uint64_t runs = smul(mult[k], count);
    s.iterations = sadd(s.iterations, smul(runs, sadd(1, cb.iterations)));
    s.work = sadd(s.work, smul(runs, sadd(kCallbackWork, cb.work)));
    note(s, smul(runs, sadd(1, cb.iterations)), at,
         what + " running its callback up to " + std::to_string(count) + " times" +
             (mult[k] > 1 ? " inside a loop" : "") + (cb.iterations > 0 ? "; in the callback: " + cb.path : ""));
  }
  return s;
}

}  // namespace

LoopBound bound_loops(const LoopBudgetInput& input) {
  LoopBound out;
  if (input.insns.empty()) return out;
  Analyzer a(input);
  // The program itself, and every callback as a run of its own (timer and
  // workqueue callbacks run outside the program).
  std::vector<size_t> roots{0};
  roots.insert(roots.end(), a.callbacks().begin(), a.callbacks().end());
  for (size_t root : roots) {
    Summary s = a.function(root);
    if (a.tail_calls()) {  // the program may tail-call itself, up to the kernel's limit
      s.iterations = smul(s.iterations, kMaxTailCalls + 1);
      s.work = smul(s.work, kMaxTailCalls + 1);
    }
    if (root != 0 && s.iterations <= out.iterations && s.work <= out.work) continue;
    if (root == 0 || s.iterations > out.iterations) {
      out.insn = s.insn;
      out.in_main = root == 0;
      out.path = s.path;
    }
    out.iterations = std::max(out.iterations, s.iterations);
    out.work = std::max(out.work, s.work);
  }
  return out;
}

}  // namespace qwen3::verify
