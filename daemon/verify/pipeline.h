// The XDP verification pipeline (policy -> compile -> verify -> behaviour) and
// the generate-verify-repair loop on top of it. daemon/service wires these to
// the VerifyProgram and GenerateVerified RPCs.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "verify/loop_budget.h"
#include "verify/repair_outcome.h"
#include "verify/verify_result.h"

namespace qwen3::verify {

struct PipelineState;  // shared by copies: concurrency slots, prepared include tree

struct VerifyRequest {
  std::string source;              // C source of one XDP program
  std::vector<Fixture> fixtures;
  // Written into the program's maps after loading, before the first fixture
  // (e.g. devmap slot 0 -> the loopback ifindex, so XDP_REDIRECT paths run).
  std::vector<MapEntry> initial_maps = {};
};

struct PipelineOptions {
  std::string clang = "clang-19";
  size_t max_source_bytes = 256 * 1024;
  int compile_timeout_ms = 30000;
  size_t compile_memory_bytes = size_t{1} << 30;
  int max_fixtures = 256;
  size_t max_packet_bytes = 9000;
  std::string work_dir = "/tmp";   // parent of the per-request sandbox dirs
  // Added by daemon/verify:
  // Where the private include tree (libbpf bpf/*.h, uapi linux/*.h + asm,
  // vmlinux.h generated from /sys/kernel/btf/vmlinux) is prepared once.
  std::string data_dir = "/var/lib/qwen3-bpfd/verify";
  // How the compiler is confined: "auto" (mount namespaces + chroot + nobody
  // when permitted, else Landlock), "namespaces" or "landlock". See sandbox_compiler.h.
  std::string compiler_sandbox = "auto";
  int max_concurrent = 2;          // compiles/verifications running at once; others queue
  int request_timeout_ms = 120000; // whole request incl. queueing; 0 = no limit
  int verify_timeout_ms = 30000;   // kernel load (all log levels) + all fixture runs
  size_t max_object_bytes = size_t{16} << 20;
  size_t max_map_bytes = size_t{64} << 20;  // sum over the program's maps (keys + values)
  // The loader child keeps only CAP_BPF + CAP_NET_ADMIN (never CAP_PERFMON or
  // CAP_SYS_ADMIN): the verifier judges as for an unprivileged loader (no
  // uninitialised stack reads, no pointer leaks, Spectre masking), and runs
  // in a network namespace of its own.
  // The loop budget of one test-run (loop_budget.h, docs/xdp-verify.md): a
  // program whose loops the verifier did not walk one by one (bpf_loop,
  // bpf_for, iterators, may_goto, nested) could run more than this many
  // iterations, or instructions, is refused before anything runs.
  uint64_t max_loop_iterations = kDefaultMaxLoopIterations;
  uint64_t max_run_work = kDefaultMaxRunWork;
};

class Pipeline {
 public:
  explicit Pipeline(PipelineOptions options = {});
  // Never throws for bad input: problems are reported in the result.
  VerifyResult verify(const VerifyRequest& request) const;
  const PipelineOptions& options() const { return options_; }

 private:
  VerifyResult verify_stages(const VerifyRequest& request) const;
  PipelineOptions options_;
  std::shared_ptr<PipelineState> state_;
};

struct Attempt {
  std::vector<ChatMessage> messages;  // what the model was given
  std::string completion;             // what it answered (cut by the completion guard)
  std::string source;                 // the C source extracted from it ("" if none)
  VerifyResult result;                // the verdict of that source
  std::string guard_note;             // what the completion guard cut, "" if nothing
  RepairOutcome repair;               // the repair engine's work on a failing source
  // "model" (its source passed as written), "engine" (the repair engine made
  // it pass), "" (not solved).
  std::string fixed_by;
};

// Returns the model's completion for a chat; supplied by the service (it runs
// the loaded model) or by tests.
using GenerateFn = std::function<std::string(const std::vector<ChatMessage>& messages)>;

// Asks the model for an XDP program solving `task`, verifies it, lets the
// repair engine fix what it can (repair.h), and only when the engine cannot
// feeds the short diagnostic back to the model, for up to `attempts` tries in
// total. Completions go through the completion guard (completion_guard.h).
// `repair_engine` false: only the model repairs.
std::vector<Attempt> generate_verified(const std::string& task, const std::vector<Fixture>& fixtures,
                                       int attempts, const GenerateFn& generate,
                                       const Pipeline& pipeline, bool repair_engine = true);

}  // namespace qwen3::verify
