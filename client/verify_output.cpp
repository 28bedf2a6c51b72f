// The readable form of the verify service's answers, shared by `verify` and
// `xdp-gen`: fixture files, results, the repair engine's report.
#include "verify_output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli_error.h"
#include "common/error.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;

namespace {

void to_proto(const verify::MapEntry& m, v1::MapEntry* out) {
  out->set_map(m.map);
  out->set_key_hex(m.key_hex);
  out->set_value_hex(m.value_hex);
}

const char* decision_name(const v1::VerifyResult& r) {
  switch (r.decision()) {
    case v1::DECISION_PASS: return "pass";
    case v1::DECISION_FAIL: return "fail";
    case v1::DECISION_ERROR: return "error";
    default: return "unknown";
  }
}

const char* verifier_class_name(v1::VerifierClass c) {
  switch (c) {
    case v1::VERIFIER_CLASS_PACKET_BOUNDS: return "packet_bounds";
    case v1::VERIFIER_CLASS_NULL_CHECK_MISSING: return "null_check_missing";
    case v1::VERIFIER_CLASS_UNINITIALIZED: return "uninitialized";
    case v1::VERIFIER_CLASS_UNBOUNDED_LOOP: return "unbounded_loop";
    case v1::VERIFIER_CLASS_INVALID_HELPER_ARGUMENT: return "invalid_helper_argument";
    case v1::VERIFIER_CLASS_INVALID_CONTEXT_ACCESS: return "invalid_context_access";
    case v1::VERIFIER_CLASS_OTHER: return "other";
    default: return "none";
  }
}

}  // namespace

std::string read_file_or_stdin(const std::string& path, const char* what) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::ifstream in(path, std::ios::binary);
  // A file named on the command line that cannot be read is a usage error (2), with the reason.
  if (!in) throw usage_error(std::string("cannot read ") + what + " " + path + ": " + std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw usage_error(std::string("cannot read ") + what + " " + path + ": " + std::strerror(errno));
  return s.str();
}

// A fixtures file, parsed by the daemon's own parser (daemon/verify/fixtures.h),
// so every format the service documents is accepted here unchanged: a bare
// array, {"fixtures": [...], "maps": [...]}, or the BPF-Guardian tests.json.
FixtureFileRequest load_fixtures(const std::string& path) {
  verify::FixtureFile file;
  try {
    file = verify::parse_fixture_file(read_file_or_stdin(path, "fixtures file"));
  } catch (const Error& e) {  // the parser reports bad JSON as an Error too, naming entry and key
    throw CliError("fixtures file " + path + ": " + e.what(), kExitFailed);
  }
  FixtureFileRequest out;
  out.file = file;
  for (size_t i = 0; i < file.fixtures.size(); ++i) {
    const auto& f = file.fixtures[i];
    v1::Fixture fx;
    fx.set_name(f.name.empty() ? "fixture-" + std::to_string(i) : f.name);
    fx.set_packet_hex(f.packet_hex);
    fx.set_expected_action(f.expected_action);
    fx.set_expected_packet_hex(f.expected_packet_hex);
    for (const auto& m : f.expected_maps) to_proto(m, fx.add_expected_maps());
    fx.set_validator(f.validator);
    out.fixtures.push_back(std::move(fx));
  }
  for (const auto& m : file.maps) {
    v1::MapEntry e;
    to_proto(m, &e);
    out.initial_maps.push_back(std::move(e));
  }
  return out;
}

const char* stage_name(v1::Stage s) {
  switch (s) {
    case v1::STAGE_POLICY: return "policy";
    case v1::STAGE_COMPILE: return "compile";
    case v1::STAGE_VERIFY: return "verify";
    case v1::STAGE_BEHAVIOUR: return "behaviour";
    case v1::STAGE_INFRASTRUCTURE: return "infrastructure";
    case v1::STAGE_ANSWER: return "answer";
    default: return "none";
  }
}

std::string indent(const std::string& text, const std::string& prefix) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out += prefix + line + "\n";
  return out;
}

// The readable form of one VerifyResult; `name` labels the program.
void print_result(const v1::VerifyResult& r, const std::string& name) {
  std::string decision = r.decision_name().empty() ? decision_name(r) : r.decision_name();
  for (auto& c : decision) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::printf("%s: %s", name.c_str(), decision.c_str());
  if (r.first_failed_stage() != v1::STAGE_NONE) std::printf(" at stage %s", stage_name(r.first_failed_stage()));
  std::printf("\n");
  if (!r.summary().empty()) std::printf("  %s\n", r.summary().c_str());
  if (!r.compiler_diagnostics().empty()) {
    std::printf("compiler:\n");
    for (const auto& d : r.compiler_diagnostics()) {
      std::string where = name;
      if (d.line() > 0) where += ":" + std::to_string(d.line()) + (d.column() > 0 ? ":" + std::to_string(d.column()) : "");
      // First line after the location; clang's source/caret lines below it, indented.
      std::string text = d.text().empty() ? d.stage_message() : d.text();
      while (!text.empty() && text.back() == '\n') text.pop_back();
      const size_t nl = text.find('\n');
      std::printf("  %s: %s\n", where.c_str(), text.substr(0, nl).c_str());
      if (nl != std::string::npos) std::printf("%s", indent(text.substr(nl + 1), "    ").c_str());
    }
  }
  if (r.verifier_class() != v1::VERIFIER_CLASS_NONE || !r.verifier_log_excerpt().empty()) {
    std::string cls = r.verifier_class_name().empty() ? verifier_class_name(r.verifier_class()) : r.verifier_class_name();
    std::printf("verifier: rejected (%s)", cls.c_str());
    if (r.verifier_line() > 0) std::printf(" at line %d", r.verifier_line());
    std::printf("\n");
    if (!r.verifier_source_line().empty())
      std::printf("  %5d | %s\n", r.verifier_line(), r.verifier_source_line().c_str());
    if (!r.verifier_log_excerpt().empty()) std::printf("  log:\n%s", indent(r.verifier_log_excerpt(), "    ").c_str());
  }
  if (!r.proof_note().empty() || !r.required_proof().empty()) {
    std::printf("proof:");
    if (r.proof_line() > 0) std::printf(" lost at line %d", r.proof_line());
    std::printf("\n");
    if (r.proof_line() > 0 && !r.proof_source_line().empty())
      std::printf("  %5d | %s\n", r.proof_line(), r.proof_source_line().c_str());
    if (!r.proof_note().empty()) std::printf("  %s\n", r.proof_note().c_str());
    if (!r.required_proof().empty()) std::printf("  needed: %s\n", r.required_proof().c_str());
  }
  if (!r.error_id().empty()) {
    std::printf("diagnosis: %s (%s)", r.error_id().c_str(), r.error_class().c_str());
    if (r.span_line() > 0) std::printf(" at line %d", r.span_line());
    std::printf("\n");
    if (!r.next_action().empty()) std::printf("  next: %s\n", r.next_action().c_str());
  }
  if (r.verified_insns() > 0) std::printf("verified instructions: %u\n", r.verified_insns());
  if (!r.compile_sandbox().empty()) std::printf("compiler sandbox: %s\n", r.compile_sandbox().c_str());
  if (!r.fixtures().empty()) {
    int passed = 0;
    for (const auto& f : r.fixtures()) passed += f.passed();
    std::printf("fixtures: %d of %d passed", passed, r.fixtures_size());
    if (r.fixtures_not_run() > 0) std::printf(", %d not run", r.fixtures_not_run());
    if (r.fixtures_not_checked() > 0) std::printf(", %d partly not checked", r.fixtures_not_checked());
    std::printf("\n");
    for (const auto& f : r.fixtures()) {
      if (!f.ran()) {
        std::printf("  skip  %s: %s\n", f.name().c_str(), f.note().c_str());
        continue;
      }
      if (f.passed()) {
        std::printf("  ok    %s: %s\n", f.name().c_str(), f.got_action().c_str());
        if (!f.not_checked().empty()) std::printf("        %s\n", f.not_checked().c_str());
        continue;
      }
      std::printf("  FAIL  %s: expected %s, got %s\n", f.name().c_str(), f.expected_action().c_str(),
                  f.got_action().empty() ? "(nothing)" : f.got_action().c_str());
      if (!f.expected_packet_hex().empty() && f.expected_packet_hex() != f.got_packet_hex()) {
        std::printf("        expected packet %s\n", f.expected_packet_hex().c_str());
        std::printf("        got packet      %s\n", f.got_packet_hex().c_str());
      }
      // The note often repeats the verdict; print it only when it adds something.
      const std::string verdict = "expected " + f.expected_action() + ", got " + f.got_action();
      if (!f.note().empty() && f.note() != verdict) std::printf("        note: %s\n", f.note().c_str());
    }
  }
}



void print_repair(const v1::RepairReport& rep, const std::string& name) {
  if (!rep.attempted()) {
    if (!rep.note().empty()) std::printf("repair: %s\n", rep.note().c_str());
    return;
  }
  if (!rep.fixed()) {
    std::printf("repair: not fixed after %d candidate%s (%.0f ms): %s\n", rep.candidates_tried(),
                rep.candidates_tried() == 1 ? "" : "s", rep.elapsed_ms(), rep.note().c_str());
    return;
  }
  std::printf("repair: fixed with %d edit%s after %d candidate%s (%.0f ms)\n", rep.steps_size(),
              rep.steps_size() == 1 ? "" : "s", rep.candidates_tried(), rep.candidates_tried() == 1 ? "" : "s",
              rep.elapsed_ms());
  for (const auto& s : rep.steps()) std::printf("  %s: %s\n", s.kind().c_str(), s.description().c_str());
  std::printf("%s", rep.diff().c_str());
  std::printf("after the fix:\n");
  print_result(rep.result(), name);
}

}  // namespace qwen3::cli
