#include "grpc/verify_mapping.h"

#include "verify/diagnostic_v2.h"

namespace qwen3 {

namespace pb = qwen3bpf::v1;

namespace {

pb::Decision decision_of(verify::Decision d) {
  switch (d) {
    case verify::Decision::pass: return pb::DECISION_PASS;
    case verify::Decision::fail: return pb::DECISION_FAIL;
    case verify::Decision::error: return pb::DECISION_ERROR;
  }
  return pb::DECISION_UNSPECIFIED;
}

}  // namespace

std::vector<verify::MapEntry> map_entries_from_proto(const google::protobuf::RepeatedPtrField<pb::MapEntry>& in) {
  std::vector<verify::MapEntry> out;
  out.reserve(in.size());
  for (const auto& m : in) out.push_back({m.map(), m.key_hex(), m.value_hex()});
  return out;
}

std::vector<verify::Fixture> fixtures_from_proto(const google::protobuf::RepeatedPtrField<pb::Fixture>& in) {
  std::vector<verify::Fixture> out;
  out.reserve(in.size());
  for (const auto& f : in)
    out.push_back({f.name(), f.packet_hex(), f.expected_action(), f.expected_packet_hex(),
                   map_entries_from_proto(f.expected_maps()), f.validator()});
  return out;
}

void verify_result_to_proto(const verify::VerifyResult& r, pb::VerifyResult* out) {
  out->set_decision(decision_of(r.decision));
  out->set_first_failed_stage(static_cast<pb::Stage>(static_cast<int>(r.first_failed_stage)));
  out->set_summary(r.summary);
  for (const auto& d : r.compiler_diagnostics) {
    auto* o = out->add_compiler_diagnostics();
    o->set_stage_message(d.stage_message);
    o->set_line(d.line);
    o->set_column(d.column);
    o->set_text(d.text);
  }
  out->set_verifier_log_excerpt(r.verifier_log_excerpt);
  out->set_verifier_line(r.verifier_line);
  out->set_verifier_source_line(r.verifier_source_line);
  out->set_verifier_class(static_cast<pb::VerifierClass>(static_cast<int>(r.verifier_class)));
  out->set_verified_insns(r.verified_insns);
  out->set_compile_sandbox(r.compile_sandbox);
  for (const auto& f : r.fixtures) {
    auto* o = out->add_fixtures();
    o->set_name(f.name);
    o->set_passed(f.passed);
    o->set_expected_action(f.expected_action);
    o->set_got_action(f.got_action);
    o->set_expected_packet_hex(f.expected_packet_hex);
    o->set_got_packet_hex(f.got_packet_hex);
    o->set_note(f.note);
    o->set_ran(f.ran);
    o->set_not_checked(f.not_checked);
    o->set_run_ns(f.run_ns);
    o->set_cpu_ns(f.cpu_ns);
  }
  out->set_decision_name(verify::to_string(r.decision));
  out->set_stage_name(verify::to_string(r.first_failed_stage));
  out->set_verifier_class_name(verify::to_string(r.verifier_class));
  out->set_fixtures_not_run(r.fixtures_not_run);
  out->set_fixtures_not_checked(r.fixtures_not_checked);
  out->set_error_id(r.error_id);
  out->set_error_class(r.error_class);
  out->set_span_line(r.span_line);
  out->set_span_column_start(r.span_column_start);
  out->set_span_column_end(r.span_column_end);
  out->set_span_text(r.span_text);
  out->set_next_action(r.next_action);
  out->set_loop_iteration_bound(r.loop_iteration_bound);
  out->set_run_work_bound(r.run_work_bound);
  out->set_proof_line(r.proof_line);
  out->set_proof_source_line(r.proof_source_line);
  out->set_proof_note(r.proof_note);
  out->set_required_proof(r.required_proof);
  out->set_short_diagnostic(r.short_diagnostic);
  if (auto d = verify::diagnostic_v2(r); !d.empty())
    out->set_diagnostic_v2_json(d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void repair_to_proto(const verify::RepairOutcome& r, pb::RepairReport* out) {
  out->set_attempted(r.attempted);
  out->set_fixed(r.fixed);
  out->set_source(r.source);
  out->set_diff(r.diff);
  for (const auto& s : r.steps) {
    auto* o = out->add_steps();
    o->set_kind(s.kind);
    o->set_description(s.description);
    o->set_line(s.line);
  }
  if (r.fixed) verify_result_to_proto(r.result, out->mutable_result());
  out->set_candidates_tried(r.candidates_tried);
  out->set_elapsed_ms(r.elapsed_ms);
  out->set_note(r.note);
}

void attempt_to_proto(const verify::Attempt& a, pb::VerifyAttempt* o) {
  for (const auto& m : a.messages) {
    auto* pm = o->add_messages();
    pm->set_role(m.role);
    pm->set_content(m.content);
  }
  o->set_completion(a.completion);
  o->set_source(a.source);
  verify_result_to_proto(a.result, o->mutable_result());
  o->set_guard_note(a.guard_note);
  repair_to_proto(a.repair, o->mutable_repair());
  o->set_fixed_by(a.fixed_by);
}

}  // namespace qwen3
