#include "verify/repair.h"

#include <chrono>

#include "verify/repair_candidates.h"
#include "verify/unified_diff.h"

namespace qwen3::verify {
namespace {

using Clock = std::chrono::steady_clock;

int stage_rank(const VerifyResult& r) {
  if (r.decision == Decision::pass) return 4;
  switch (r.first_failed_stage) {
    case Stage::compile: return 1;
    case Stage::verify: return 2;
    case Stage::behaviour: return 3;
    default: return 0;
  }
}

int errors_of(const VerifyResult& r) {
  int n = 0;
  for (const auto& d : r.compiler_diagnostics) n += d.text.rfind("error", 0) == 0;
  return n;
}

// Fixtures that passed in `before` and fail in `after` (by name).
bool loses_a_fixture(const VerifyResult& before, const VerifyResult& after) {
  for (const auto& b : before.fixtures) {
    if (!b.passed) continue;
    for (const auto& a : after.fixtures)
      if (a.name == b.name && !a.passed) return true;
  }
  return false;
}

int passed_fixtures(const VerifyResult& r) {
  int n = 0;
  for (const auto& f : r.fixtures) n += f.passed;
  return n;
}

// Whether `after` is a step towards a pass from `before` (never one that weakens what passed).
bool progresses(const VerifyResult& before, const VerifyResult& after) {
  if (after.decision == Decision::error) return false;
  if (stage_rank(after) != stage_rank(before)) return stage_rank(after) > stage_rank(before);
  switch (after.first_failed_stage) {
    case Stage::compile: return errors_of(after) < errors_of(before);
    case Stage::verify:
      // The rejection moved on, not back: another statement, no earlier in the source (an
      // inserted check shifts the lines after it down, never up).
      return after.verifier_source_line != before.verifier_source_line && after.verifier_line >= before.verifier_line;
    case Stage::behaviour:
      return !loses_a_fixture(before, after) && passed_fixtures(after) > passed_fixtures(before);
    default: return false;
  }
}

}  // namespace

RepairOutcome repair_program(const Pipeline& pipeline, const VerifyRequest& request, const VerifyResult& before,
                             const RepairOptions& options) {
  RepairOutcome out;
  const auto t0 = Clock::now();
  auto elapsed_ms = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
  if (before.decision != Decision::fail || stage_rank(before) == 0) {
    out.note = before.decision == Decision::pass ? "the program already passes"
                                                 : "nothing to repair at stage " + std::string(to_string(before.first_failed_stage));
    return out;
  }
  out.attempted = true;
  std::string source = request.source;
  VerifyResult current = before;
  std::vector<RepairStep> steps;
  for (int round = 0; round < options.max_rounds; ++round) {
    const std::vector<Candidate> candidates = repair_candidates(source, current);
    if (candidates.empty()) {
      out.note = "no candidate edit for this failure (" + std::string(to_string(current.first_failed_stage)) +
                 (current.first_failed_stage == Stage::verify ? ", " + std::string(to_string(current.verifier_class)) : "") +
                 ")";
      break;
    }
    const Candidate* forward = nullptr;
    VerifyResult forward_result;
    for (const Candidate& c : candidates) {
      if (out.candidates_tried >= options.max_candidates || elapsed_ms() > options.time_limit_ms) break;
      ++out.candidates_tried;
      VerifyResult r = pipeline.verify(VerifyRequest{c.source, request.fixtures, request.initial_maps});
      if (r.decision == Decision::pass && !loses_a_fixture(before, r)) {
        steps.push_back({c.kind, c.description, c.line});
        out.fixed = true;
        out.source = c.source;
        out.diff = unified_diff(request.source, c.source, "prog.c");
        out.steps = std::move(steps);
        out.result = std::move(r);
        out.elapsed_ms = elapsed_ms();
        return out;
      }
      if (!forward && progresses(current, r)) {
        forward = &c;
        forward_result = std::move(r);
      }
    }
    if (!forward) {
      out.note = out.candidates_tried >= options.max_candidates || elapsed_ms() > options.time_limit_ms
                     ? "budget spent (" + std::to_string(out.candidates_tried) + " candidates) without a passing program"
                     : "none of " + std::to_string(candidates.size()) + " candidate edits passed or moved the failure on";
      break;
    }
    steps.push_back({forward->kind, forward->description, forward->line});
    source = forward->source;
    current = std::move(forward_result);
  }
  if (out.note.empty()) out.note = "no passing program within " + std::to_string(options.max_rounds) + " edits";
  out.elapsed_ms = elapsed_ms();
  return out;
}

}  // namespace qwen3::verify
