// The readable form of the verify service's answers, shared by `qwen3-bpf
// verify` and `qwen3-bpf xdp-gen`: fixture files read with the daemon's own
// parser, results, and the repair engine's report.
#pragma once

#include <string>
#include <vector>

#include "qwen3bpf/v1/qwen3bpf.pb.h"
#include "verify/fixtures.h"

namespace qwen3::cli {

// A file named on the command line, or stdin for "-"; unreadable: a usage error with the reason.
std::string read_file_or_stdin(const std::string& path, const char* what);

// A fixtures file in every format the service documents (a bare array,
// {"fixtures", "maps"}, BPF-Guardian tests.json), parsed by daemon/verify/fixtures.h.
struct FixtureFileRequest {
  verify::FixtureFile file;
  std::vector<qwen3bpf::v1::Fixture> fixtures;
  std::vector<qwen3bpf::v1::MapEntry> initial_maps;
};
FixtureFileRequest load_fixtures(const std::string& path);

const char* stage_name(qwen3bpf::v1::Stage s);
std::string indent(const std::string& text, const std::string& prefix);

// One VerifyResult, readable; `name` labels the program.
void print_result(const qwen3bpf::v1::VerifyResult& r, const std::string& name);
// What the repair engine did: the edits, the unified diff and the verdict after them.
void print_repair(const qwen3bpf::v1::RepairReport& report, const std::string& name);

}  // namespace qwen3::cli
