#include "verify/result_json.h"

#include "verify/diagnostic_v2.h"

namespace qwen3::verify {

nlohmann::json to_json(const VerifyResult& r) {
  nlohmann::json j;
  j["decision"] = to_string(r.decision);
  j["first_failed_stage"] = to_string(r.first_failed_stage);
  j["summary"] = r.summary;
  j["behaviour_checked"] = r.behaviour_checked;
  auto& diags = j["compiler_diagnostics"] = nlohmann::json::array();
  for (const auto& d : r.compiler_diagnostics)
    diags.push_back({{"line", d.line}, {"column", d.column}, {"text", d.text}, {"message", d.stage_message}});
  j["verifier_class"] = to_string(r.verifier_class);
  j["verifier_message"] = r.verifier_message;
  j["verifier_line"] = r.verifier_line;
  j["verifier_insn"] = r.verifier_insn;
  j["verifier_column"] = r.verifier_column;
  j["verifier_source_line"] = r.verifier_source_line;
  j["verifier_log_excerpt"] = r.verifier_log_excerpt;
  j["verified_insns"] = r.verified_insns;
  j["compile_sandbox"] = r.compile_sandbox;
  j["fixtures_not_run"] = r.fixtures_not_run;
  j["fixtures_not_checked"] = r.fixtures_not_checked;
  j["error_id"] = r.error_id;
  j["error_class"] = r.error_class;
  j["span"] = {{"line", r.span_line},
               {"column_start", r.span_column_start},
               {"column_end", r.span_column_end},
               {"text", r.span_text}};
  j["next_action"] = r.next_action;
  j["loop_iteration_bound"] = r.loop_iteration_bound;
  j["run_work_bound"] = r.run_work_bound;
  j["proof"] = {{"line", r.proof_line},
                {"source_line", r.proof_source_line},
                {"note", r.proof_note},
                {"required", r.required_proof}};
  j["short_diagnostic"] = r.short_diagnostic;
  j["diagnostic"] = diagnostic_v2(r);
  auto& fixits = j["fixits"] = nlohmann::json::array();
  for (const auto& f : r.fixits)
    fixits.push_back({{"kind", f.kind}, {"description", f.description}, {"line", f.line}, {"diff", f.diff}});
  auto& fx = j["fixtures"] = nlohmann::json::array();
  for (const auto& f : r.fixtures)
    fx.push_back({{"name", f.name},
                  {"passed", f.passed},
                  {"expected_action", f.expected_action},
                  {"got_action", f.got_action},
                  {"expected_packet_hex", f.expected_packet_hex},
                  {"got_packet_hex", f.got_packet_hex},
                  {"note", f.note},
                  {"ran", f.ran},
                  {"not_checked", f.not_checked},
                  {"run_ns", f.run_ns},
                  {"cpu_ns", f.cpu_ns}});
  return j;
}

std::string to_json_text(const VerifyResult& r, int indent) {
  return to_json(r).dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace qwen3::verify
