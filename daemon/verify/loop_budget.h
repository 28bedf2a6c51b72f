// The loop budget: a bound, known before any fixture runs, on how much work one
// test-run of a verified program can do. The verifier walks ordinary loops
// iteration by iteration (so their work is bounded by what it processed), but
// not the loops it proves once and lets run many times: bpf_loop and
// bpf_for_each_map_elem callbacks, open-coded iterators (bpf_for /
// bpf_iter_num_*), may_goto loops, and these nested in each other. A kernel
// test-run cannot be interrupted (not even by SIGKILL), so such programs are
// refused when their bound exceeds the budget (docs/xdp-verify.md, "Loop budget").
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace qwen3::verify {

// The kernel's own cap (BPF_MAX_LOOPS): bpf_loop refuses larger counts,
// bpf_iter_num_new larger ranges, may_goto allows this many jumps.
constexpr uint64_t kKernelMaxLoops = uint64_t{1} << 23;
// Default budgets per test-run (PipelineOptions::max_loop_iterations, max_run_work).
constexpr uint64_t kDefaultMaxLoopIterations = 10'000'000;
constexpr uint64_t kDefaultMaxRunWork = 1'000'000'000;
// Work units: one per instruction; a helper or kfunc call counts as this many.
constexpr uint64_t kCallWork = 64;
// A program may tail-call itself (prog array filled with its own fd) this often.
constexpr uint64_t kMaxTailCalls = 33;

struct LoopBudgetInput {
  std::vector<bpf_insn> insns;    // the program as loaded (subprograms appended)
  uint64_t verified_insns = 0;    // bounds an ordinary loop's trip count
  uint64_t max_map_entries = 0;   // bounds bpf_for_each_map_elem
  std::function<std::string(int32_t btf_id)> kfunc_name;
};

struct LoopBound {
  uint64_t iterations = 0;  // loop-body runs the verifier did not walk one by one (saturates at UINT64_MAX)
  uint64_t work = 0;        // instructions, calls weighted kCallWork
  int insn = -1;            // instruction of the outermost loop construct behind most iterations (-1: none)
  bool in_main = false;     // `insn` lies in the program's own function (not an appended subprogram)
  std::string path;         // e.g. "bpf_loop up to 255 times; in its callback: bpf_loop up to 8388608 times"
};

LoopBound bound_loops(const LoopBudgetInput& input);

}  // namespace qwen3::verify
