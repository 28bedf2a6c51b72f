#include "verify/diagnostic_v2.h"

#include "verify/verifier_log.h"

namespace qwen3::verify {
namespace {

using nlohmann::json;

json or_null(int v) { return v > 0 ? json(v) : json(nullptr); }

std::string failure_class(const VerifyResult& r) {
  const std::string& c = r.error_class;
  if (c == "verifier_limit" || c == "compile_limit" || r.verifier_class == VerifierClass::unbounded_loop)
    return "verifier_limit";
  if (c == "fixtures") return "input_error";
  if (c == "infrastructure" || c == "policy_violation" || c == "security_policy") return "environment_or_configuration";
  if (r.error_id == "BPFV-VER-OTHER") return "unsupported_verifier_message";
  return "source_bug";
}

std::string span_confidence(const VerifyResult& r) {
  if (r.first_failed_stage == Stage::verify) {
    if (r.verifier_insn >= 0 && r.verifier_column > 0) return "exact_pc";
    if (r.verifier_line > 0) return "nearest_source_comment";
    return "none";
  }
  return r.span_line > 0 ? "terminal_line_only" : "none";
}

}  // namespace

json diagnostic_v2(const VerifyResult& r) {
  if (r.decision == Decision::pass || r.error_id.empty()) return json::object();
  const std::string cls = failure_class(r);
  const bool verify = r.first_failed_stage == Stage::verify;
  json j;
  j["diagnostic_version"] = "bpfix.diagnostic/v2";
  j["error_id"] = r.error_id;
  j["failure_class"] = cls;
  j["confidence"] = !r.required_proof.empty() && r.proof_line > 0 ? "high" : cls == "source_bug" ? "medium" : "low";
  j["diagnostic_kind"] = cls == "unsupported_verifier_message" ? "unsupported_verifier_message" : "supported";
  j["help_safety"] = cls == "source_bug" ? "repair_hint" : "triage_only";
  j["span_confidence"] = span_confidence(r);
  j["message"] = r.error_class + ": " + first_line(verify && !r.verifier_message.empty() ? r.verifier_message : r.summary);
  j["required_proof"] = r.required_proof;
  const int line = verify ? r.verifier_line : r.span_line;
  j["source_span"] = {{"path", "prog.c"},
                      {"line_start", or_null(line)},
                      {"line_end", or_null(line)},
                      {"instruction_pc", verify && r.verifier_insn >= 0 ? json(r.verifier_insn) : json(nullptr)},
                      {"source_text", r.span_text.empty() ? json(nullptr) : json(r.span_text)}};
  j["related_spans"] = json::array();
  if (r.proof_line > 0)
    j["related_spans"].push_back({{"path", "prog.c"},
                                  {"line_start", r.proof_line},
                                  {"line_end", r.proof_line},
                                  {"instruction_pc", nullptr},
                                  {"source_text", r.proof_source_line},
                                  {"label", r.proof_note}});
  j["evidence"] = json::array();
  if (verify && !r.verifier_message.empty())
    j["evidence"].push_back({{"kind", "terminal_verifier_error"}, {"detail", first_line(r.verifier_message)}, {"line", nullptr}});
  if (verify && r.verifier_insn >= 0)
    j["evidence"].push_back({{"kind", "instruction_pc"},
                             {"detail", "rejected instruction " + std::to_string(r.verifier_insn)},
                             {"line", or_null(r.verifier_line)}});
  if (!r.proof_note.empty())
    j["evidence"].push_back({{"kind", "verifier_trace"}, {"detail", r.proof_note}, {"line", or_null(r.proof_line)}});
  j["help"] = r.next_action.empty() ? json::array() : json::array({r.next_action});
  // bpfix's help is a list of strings and bpfix does not rewrite source: each fix-it (the
  // edits the repair engine would try first) is one more entry, a header line and the
  // unified diff: "fixit KIND line N (not checked): DESCRIPTION\n--- a/prog.c\n...".
  for (const auto& f : r.fixits)
    j["help"].push_back("fixit " + f.kind + " line " + std::to_string(f.line) + " (not checked): " + f.description +
                        "\n" + f.diff);
  j["metadata"] = {{"case_id", nullptr},
                   {"input_kind", "verifier-log"},
                   {"object_path", nullptr},
                   {"object_programs", json::array()},
                   {"object_analysis_error", nullptr},
                   {"trace_state_count", 0},
                   {"analysis_error", nullptr}};
  return j;
}

}  // namespace qwen3::verify
