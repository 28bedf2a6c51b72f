// Stages 3 and 4: load the compiled object through the kernel verifier and
// run each fixture with BPF_PROG_TEST_RUN. All of it happens in a forked
// child process with a deadline: a hostile ELF that upsets libbpf cannot take
// the daemon down, the child can be killed on time-out, and when it exits the
// kernel frees every program and map it created - nothing stays loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "verify/loop_budget.h"

namespace qwen3::verify {

struct LoaderConfig {
  int timeout_ms = 30000;
  size_t max_map_bytes = size_t{64} << 20;
  // Budgets of one test-run (loop_budget.h): loop iterations the verifier did
  // not walk, and instructions (calls weighted). Over either, nothing runs.
  uint64_t max_loop_iterations = kDefaultMaxLoopIterations;
  uint64_t max_run_work = kDefaultMaxRunWork;
};

struct PacketInput {
  std::string name;
  std::string bytes;
  // Map elements to read after this packet ran: (map name, key bytes).
  std::vector<std::pair<std::string, std::string>> read_maps;
};

// A map element written after loading, before the first packet runs.
struct MapWrite {
  std::string map;
  std::string key;    // bytes
  std::string value;  // bytes; zero-padded up to the map's value size
};

struct PacketRun {
  std::string name;
  bool ran = false;
  uint32_t retval = 0;
  std::string output;    // packet bytes after the program ran
  std::string error;     // why the kernel refused to run it
  int error_errno = 0;
  // Per read_maps entry: the value (per-CPU maps: summed over CPUs for 4- and
  // 8-byte values), or why it could not be read (map_errors[i] non-empty).
  std::vector<std::string> map_values;
  std::vector<std::string> map_errors;
  uint64_t run_ns = 0;  // the kernel's duration of the run (BPF_PROG_TEST_RUN)
  int64_t cpu_ns = 0;   // the loader thread's CPU time for the test-run call
};

struct LoadReport {
  bool finished = false;        // the child reported back
  bool timed_out = false;
  std::string child_failure;    // crash / protocol problem, if !finished
  bool opened = false;          // libbpf accepted the ELF
  bool loaded = false;          // the verifier accepted the program
  std::string reject_reason;    // open/limit problems found before the verifier ran
  bool infrastructure = false;  // the reject is our problem, not the program's
  std::string libbpf_messages;  // what libbpf printed (warnings, errors)
  int load_errno = 0;
  std::string log_level1;       // verifier log of the failed load at level 1 (tail)
  std::string log_level2;       // ... and at level 2 (tail), if it was retried
  uint32_t verified_insns = 0;
  std::string program_name;
  std::string map_init_error;   // an initial map write failed (nothing ran)
  std::vector<PacketRun> runs;
  bool private_netns = false;   // the child ran in a network namespace of its own
  int loop_insn = -1;           // the loop construct behind a loop-budget refusal (program's own function)
  uint64_t loop_iterations = 0; // the bound on one run's unwalked loop iterations
  uint64_t run_work = 0;        // ... and on its instructions
};

// Why a program may not call helper `id` (BPF_FUNC_*), or "" when it may:
// the allowlist of what packet programs need (docs/xdp-verify.md).
std::string helper_refusal(int32_t id);
// The same for a kfunc, by name.
std::string kfunc_refusal(const std::string& name);
// Why the ELF object may not be loaded because of a kfunc it declares, or "":
// judged from the object's own BTF, before libbpf rewrites the declarations.
std::string elf_kfunc_refusal(const std::string& object);

LoadReport load_and_run(const std::string& object, const std::vector<PacketInput>& packets,
                        const LoaderConfig& config, const std::vector<MapWrite>& initial_maps = {});

}  // namespace qwen3::verify
