#include "verify/short_diagnostic.h"

namespace qwen3::verify {
namespace {

std::string clip(const std::string& s, size_t n) {
  std::string one = s;
  for (auto& c : one)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return one.size() <= n ? one : one.substr(0, n) + "...";
}

std::string trimmed(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b);
}

void compile_part(const VerifyResult& r, std::string& out) {
  int shown = 0;
  for (const auto& d : r.compiler_diagnostics) {
    const bool warning = d.text.rfind("warning", 0) == 0;
    if (warning || ++shown > 3) continue;
    out += (d.line > 0 ? "line " + std::to_string(d.line) + ": " : std::string()) + clip(d.text.substr(0, d.text.find('\n')), 220) + "\n";
  }
  if (shown == 0 && !r.compiler_diagnostics.empty()) out += clip(r.compiler_diagnostics.front().text, 220) + "\n";
}

void verify_part(const VerifyResult& r, std::string& out) {
  if (r.verifier_line > 0)
    out += "Rejected at line " + std::to_string(r.verifier_line) + ": " + clip(trimmed(r.verifier_source_line), 160) + "\n";
  if (!r.verifier_message.empty()) out += "Verifier: " + clip(r.verifier_message, 200) + "\n";
  if (!r.proof_note.empty()) {
    out += "Proof lost";
    if (r.proof_line > 0 && r.proof_line != r.verifier_line)
      out += " at line " + std::to_string(r.proof_line) + " (" + clip(trimmed(r.proof_source_line), 120) + ")";
    out += ": " + clip(r.proof_note, 220) + "\n";
  }
  if (!r.required_proof.empty()) out += "Needed: " + clip(r.required_proof, 200) + "\n";
}

void behaviour_part(const VerifyResult& r, std::string& out) {
  int shown = 0;
  for (const auto& f : r.fixtures) {
    if (f.passed || !f.ran || ++shown > 3) continue;
    out += "Fixture " + clip(f.name, 40) + ": expected " +
           f.expected_action + ", got " + f.got_action;
    if (!f.expected_packet_hex.empty() && f.expected_packet_hex != f.got_packet_hex) out += " (output bytes differ)";
    out += "\n";
  }
}

}  // namespace

std::string short_diagnostic(const VerifyResult& r) {
  if (r.decision == Decision::pass) return "";
  std::string out = "Stage: " + std::string(to_string(r.first_failed_stage));
  if (r.first_failed_stage == Stage::verify) out += " (" + std::string(to_string(r.verifier_class)) + ")";
  if (!r.error_id.empty()) out += ", " + r.error_id;
  out += ": " + clip(r.summary, 200) + "\n";
  switch (r.first_failed_stage) {
    case Stage::policy:
    case Stage::compile: compile_part(r, out); break;
    case Stage::verify: verify_part(r, out); break;
    case Stage::behaviour: behaviour_part(r, out); break;
    default: break;
  }
  if (!r.next_action.empty()) out += "Next: " + clip(r.next_action, 300) + "\n";
  if (out.size() > kShortDiagnosticChars) out = out.substr(0, kShortDiagnosticChars - 4) + "...\n";
  return out;
}

}  // namespace qwen3::verify
