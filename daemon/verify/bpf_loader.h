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

namespace qwen3::verify {

struct LoaderConfig {
  int timeout_ms = 30000;
  size_t max_map_bytes = size_t{64} << 20;
  // The child keeps CAP_BPF + CAP_NET_ADMIN + CAP_PERFMON; with this set, only
  // CAP_BPF + CAP_NET_ADMIN (see PipelineOptions::minimal_loader_capabilities).
  bool minimal_capabilities = false;
};

struct PacketInput {
  std::string name;
  std::string bytes;
};

struct PacketRun {
  std::string name;
  bool ran = false;
  uint32_t retval = 0;
  std::string output;    // packet bytes after the program ran
  std::string error;     // why the kernel refused to run it
  int error_errno = 0;
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
  std::vector<PacketRun> runs;
};

LoadReport load_and_run(const std::string& object, const std::vector<PacketInput>& packets,
                        const LoaderConfig& config);

}  // namespace qwen3::verify
